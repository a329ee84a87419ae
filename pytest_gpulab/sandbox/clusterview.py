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

import contextlib
import http.client
import json
import re
import shutil
import socket
import socketserver
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..cluster.upstream import Upstream
from .doctor import OWN_HEADERS, POD_PATH, Doctor, PodKey, canonical, json_accept, status

# At most this many requests in flight (watches included) per server: more are closed at once, so a
# script cannot tie the grader's threads and API connections up after its run.
MAX_CONNECTIONS = 64
UNSAFE_PATH = re.compile(r"[\x00-\x20\x7f-\uffff]")  # a byte the API server's client would refuse to send


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
        if UNSAFE_PATH.search(self.path):
            self._send(400, status(400, "BadRequest", "the path holds a character a URL may not"))
            return
        path = canonical(urlsplit(self.path).path)
        hidden = POD_PATH.match(path)
        if hidden and (hidden.group(1), hidden.group(2)) in self.view.doctor.hidden:
            self._send(404, status(404, "NotFound", f'pods "{hidden.group(2)}" not found'))
            return
        headers = {"Accept": json_accept(self.headers.get("Accept")), "Accept-Encoding": "identity"}
        watch = bool(re.search(r"[?&]watch=(true|1)", self.path)) or path.startswith(("/watch/", "/api/v1/watch/"))
        if watch:
            response, stop = self.view.upstream.stream(self.command, self.path, headers)
            watching = threading.Thread(target=self._end_when_client_leaves, args=(stop,), daemon=True)
            watching.start()
            try:
                self._stream(response, self._passed(response), path)
            finally:
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RD)  # wakes the thread watching the client
                stop()
            return
        response, body = self.view.upstream.read(self.command, self.path, headers)
        passed = self._passed(response)
        if response.status == 200 and "json" in (response.getheader("Content-Type") or "") and self.view.doctors(path):
            shown = self.view.doctor.body(json.loads(body), path)
            if shown is None:  # a hidden object, reached by another spelling of its path
                self._send(404, status(404, "NotFound", "not found"))
                return
            body = json.dumps(shown).encode()
        self._send(response.status, body, passed)

    def _end_when_client_leaves(self, stop: Callable[[], None]) -> None:
        """A watch's client said nothing after its request: when its connection closes (the script's run
        ended), the upstream watch ends too, and with it this request's thread and slot."""
        with contextlib.suppress(OSError):
            self.connection.recv(1, socket.MSG_PEEK)
        stop()

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


class _Bounded(socketserver.ThreadingMixIn):
    """At most MAX_CONNECTIONS requests at once; a handler's failure is counted, never printed (a script
    could otherwise fill the grader's output with tracebacks)."""

    daemon_threads = True
    view: DoctoredView

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.view.slots.acquire(blocking=False):
            self.shutdown_request(request)  # type: ignore[attr-defined]
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.view.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.view.errors += 1


class _TcpServer(_Bounded, HTTPServer):
    pass


class _UnixServer(_Bounded, socketserver.UnixStreamServer):
    pass


class DoctoredView:
    """A read-only proxy of the cluster at ``kubeconfig`` that hides ``hidden_pods`` ((namespace, name)).

    It serves on loopback TCP (``kubeconfig``) and on a Unix socket (``socket``, in a folder only the
    grader's user may enter), which the sandbox binds into a script's network namespace.

    Example:: with DoctoredView(live.source, {("ns", "pod")}, tmp) as view: runs.run("ns", cluster=True, view=view)
    """

    def __init__(self, kubeconfig: str | Path, hidden_pods: Iterable[PodKey], work_dir: Path) -> None:
        self.upstream = Upstream(kubeconfig)
        hidden = set(hidden_pods)
        self.doctor = Doctor(hidden, self._owners(hidden))
        self.kubeconfig = Path(work_dir) / "view-kubeconfig.yaml"
        self.refused: list[tuple[str, str]] = []
        self.errors = 0  # requests whose handling failed (a malformed request, a client gone)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._socket_dir: str | None = None

    def doctors(self, path: str) -> bool:
        """Whether a body read at (canonical) ``path`` is looked at: every one but the API's documents,
        whatever its path, since a Pod or an Event is known by its kind."""
        return bool(self.doctor.hidden) and not path.startswith(("/openapi", "/version", "/healthz", "/readyz"))

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
        tcp = _TcpServer(("127.0.0.1", 0), _Proxy)
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
