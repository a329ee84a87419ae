"""A doctored, strictly read-only view of the lab cluster, for running a learner's checker on a state
the grader chose without changing the cluster.

:class:`DoctoredView` is a loopback HTTP proxy in front of the API server. It forwards reads
(GET and HEAD) and refuses every other request with 405, recording it. It hides chosen Pods:
they vanish from lists, tables and watches, and a direct read answers 404, as for a Pod that is
gone. The DaemonSets owning them report them gone the way the controller does when a taint stops
it counting a node: desired, current, ready, available and up-to-date each drop by one, so the
status stays self-consistent, as it did in the incident. Bodies are asked for as JSON (never
protobuf or gzip) so they can be rewritten. Usable without pytest::

    with DoctoredView(kubeconfig, hidden_pods={("ns", "pod")}, work_dir=tmp) as view:
        run(script, env={**os.environ, "KUBECONFIG": str(view.kubeconfig)})
    view.refused  # [("DELETE", "/api/v1/namespaces/ns/pods/x")]
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socketserver
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .upstream import Upstream

PodKey = tuple[str, str]
DAEMONSET_COUNTS = (
    "desiredNumberScheduled",
    "currentNumberScheduled",
    "numberReady",
    "numberAvailable",
    "updatedNumberScheduled",
)
TABLE_COLUMNS = {"desired", "current", "ready", "up-to-date", "available"}
POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/?]+)")
# Headers the proxy sets itself; Content-Type passes through (aggregated discovery is told apart by it).
OWN_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive", "date", "server"}


def status(code: int, reason: str, message: str) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    return json.dumps({**body, "message": message, "reason": reason, "code": code}).encode()


def key_of(meta: Any) -> PodKey:
    meta = meta if isinstance(meta, dict) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def json_accept(accept: str | None) -> str:
    """The client's Accept without protobuf: kubectl's Table request stays a Table, in JSON."""
    kept = [part.strip() for part in (accept or "").split(",") if part.strip() and "protobuf" not in part]
    return ", ".join(kept) or "application/json"


class Doctor:
    """What the view changes in a body: hidden Pods out, their DaemonSets' counts down."""

    def __init__(self, hidden: Iterable[PodKey], owners: Counter[PodKey]) -> None:
        self.hidden = set(hidden)
        self.owners = owners  # (namespace, daemonset) -> hidden Pods it owns

    def hides(self, meta: Any) -> bool:
        return key_of(meta) in self.hidden

    def daemonset(self, ds: dict[str, Any]) -> dict[str, Any]:
        meta, counts = ds.get("metadata") or {}, dict(ds.get("status") or {})
        gone = self.owners[key_of(meta)]
        for key in DAEMONSET_COUNTS:
            if isinstance(counts.get(key), int):
                counts[key] = max(0, counts[key] - gone)
        return {**ds, "status": counts} if gone else ds

    def table(self, table: dict[str, Any], path: str) -> dict[str, Any]:
        rows = [row for row in table.get("rows") or [] if isinstance(row, dict)]
        if "/pods" in path:
            rows = [row for row in rows if not self.hides((row.get("object") or {}).get("metadata"))]
        elif "/daemonsets" in path:
            names = [str(c.get("name", "")).lower() for c in table.get("columnDefinitions") or []]
            rows = [self._table_row(row, names) for row in rows]
        return {**table, "rows": rows}

    def _table_row(self, row: dict[str, Any], names: list[str]) -> dict[str, Any]:
        meta = (row.get("object") or {}).get("metadata") or {}
        gone = self.owners[key_of(meta)]
        cells = [
            max(0, cell - gone) if name in TABLE_COLUMNS and isinstance(cell, int) else cell
            for name, cell in zip(names, row.get("cells") or [], strict=False)
        ]
        return {**row, "cells": cells} if gone else row

    def body(self, obj: Any, path: str) -> Any:
        """``obj`` as the view shows it; None when it is a hidden Pod."""
        if not isinstance(obj, dict):
            return obj
        kind = obj.get("kind")
        if kind == "Pod" and self.hides(obj.get("metadata")):
            return None
        if kind == "PodList":
            return {**obj, "items": [pod for pod in obj.get("items") or [] if not self.hides(pod.get("metadata"))]}
        if kind == "DaemonSet":
            return self.daemonset(obj)
        if kind == "DaemonSetList":
            return {**obj, "items": [self.daemonset(ds) for ds in obj.get("items") or []]}
        if kind == "Table":
            return self.table(obj, path)
        return obj

    def event(self, line: bytes, path: str) -> bytes | None:
        """One watch event as the view shows it; None when it is about a hidden Pod."""
        try:
            event = json.loads(line)
        except ValueError:
            return line
        shown = self.body(event.get("object"), path) if isinstance(event, dict) else event
        if shown is None:
            return None
        return json.dumps({**event, "object": shown}).encode() + b"\n" if isinstance(event, dict) else line


class _Proxy(BaseHTTPRequestHandler):
    """Reads through, writes refused. The server carries the view (``self.server.view``)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: Nagle held the body for 40 ms

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a learner's script should not fill the grader's output."""

    @property
    def view(self) -> DoctoredView:
        return self.server.view  # type: ignore[attr-defined]

    def _send(self, code: int, body: bytes, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(code)
        headers = list(headers)
        for name, value in headers:
            self.send_header(name, value)
        if not any(name.lower() == "content-type" for name, _ in headers):
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self) -> None:
        self.view.refused.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, 1 << 20))
        message = "this view of the cluster is read-only: the grader refuses every change"
        self._send(405, status(405, "MethodNotAllowed", message))

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _refuse

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        hidden = POD_PATH.match(path)
        if hidden and (hidden.group(1), hidden.group(2)) in self.view.doctor.hidden:
            self._send(404, status(404, "NotFound", f'pods "{hidden.group(2)}" not found'))
            return
        headers = {"Accept": json_accept(self.headers.get("Accept")), "Accept-Encoding": "identity"}
        watch = bool(re.search(r"[?&]watch=(true|1)", self.path)) or "/watch/" in path
        if watch:
            response = self.view.upstream.stream(self.command, self.path, headers)
            self._stream(response, self._passed(response), path)
            return
        response, body = self.view.upstream.read(self.command, self.path, headers)
        passed = self._passed(response)
        if response.status == 200 and "json" in (response.getheader("Content-Type") or "") and self.view.doctors(path):
            shown = self.view.doctor.body(json.loads(body), path)
            body = json.dumps(shown).encode() if shown is not None else body
        self._send(response.status, body, passed)

    @staticmethod
    def _passed(response: http.client.HTTPResponse) -> list[tuple[str, str]]:
        return [(k, v) for k, v in response.getheaders() if k.lower() not in OWN_HEADERS]

    def _stream(self, response: http.client.HTTPResponse, headers: list[tuple[str, str]], path: str) -> None:
        self.send_response(response.status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while line := response.readline():
                if (shown := self.view.doctor.event(line, path)) is not None:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(shown), shown))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return  # the script stopped watching


class _UnixProxy(_Proxy):
    disable_nagle_algorithm = False  # a Unix socket has no Nagle to disable

    def address_string(self) -> str:
        return "sandbox"


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class DoctoredView:
    """A read-only proxy of the cluster at ``kubeconfig`` that hides ``hidden_pods`` ((namespace, name)).

    It serves on loopback TCP (``kubeconfig``) and on a Unix socket (``socket``, in a folder only the
    grader's user may enter), which the sandbox binds into a script's network namespace."""

    def __init__(self, kubeconfig: str | Path, hidden_pods: Iterable[PodKey], work_dir: Path) -> None:
        self.upstream = Upstream(kubeconfig)
        hidden = set(hidden_pods)
        self.doctor = Doctor(hidden, self._owners(hidden))
        self.kubeconfig = Path(work_dir) / "view-kubeconfig.yaml"
        self.refused: list[tuple[str, str]] = []
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._socket_dir: str | None = None

    def doctors(self, path: str) -> bool:
        """Whether a body read at ``path`` may be changed by the view; others pass through as served."""
        return bool(self.doctor.hidden) and ("/pods" in path or "/daemonsets" in path)

    def _owners(self, hidden: set[PodKey]) -> Counter[PodKey]:
        owners: Counter[PodKey] = Counter()
        for namespace, name in hidden:
            pod = self.upstream.get_json(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}
            for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("kind") == "DaemonSet" and ref.get("controller"):
                    owners[(namespace, str(ref.get("name")))] += 1
        return owners

    @property
    def socket(self) -> Path:
        """The view's Unix socket (a short path: a socket's name has a limit of about 100 bytes)."""
        assert self._socket_dir is not None, "enter the view first"
        return Path(self._socket_dir) / "view.sock"

    def _serve(self, server: socketserver.BaseServer) -> None:
        server.view = self  # type: ignore[attr-defined]
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="doctored-view", daemon=True
        )  # shutdown() waits for the loop's next look
        thread.start()
        self._servers.append(server)
        self._threads.append(thread)

    def __enter__(self) -> DoctoredView:
        tcp = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
        tcp.daemon_threads = True
        self._serve(tcp)
        self._socket_dir = tempfile.mkdtemp(prefix="gpulab-view-")  # 0700: the grader's user alone enters
        self._serve(_UnixServer(str(self.socket), _UnixProxy))
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.write_text(self._config(tcp.server_address[1]))
        return self

    @staticmethod
    def _config(port: int) -> str:
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "view",
            "clusters": [{"name": "view", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "view", "user": {}}],
            "contexts": [{"name": "view", "context": {"cluster": "view", "user": "view"}}],
        })  # fmt: skip

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self.upstream.close()
        for thread in self._threads:
            thread.join(timeout=10)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
