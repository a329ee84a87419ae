"""A doctored, strictly read-only view of the lab cluster, for running a learner's checker on a state
the grader chose without changing the cluster.

:class:`DoctoredView` is a loopback HTTP proxy in front of the API server. It forwards reads
(GET and HEAD) and refuses every other request with 405, recording it. It hides chosen Pods:
they vanish from lists, tables and watches, and a direct read answers 404, as for a Pod that is
gone. The DaemonSets owning them report them gone the way the controller does when a taint stops
it counting a node: desired, current, ready, available and up-to-date each drop by one, so the
status stays self-consistent, as it did in the incident. Bodies are asked for as JSON (never
protobuf or gzip) so they can be rewritten. Usable without pytest::

    with DoctoredView(kubeconfig, hidden_pods={("ns", "pod")}, work_dir=tmp) as view, view.door(tcp=True) as door:
        run(script, env={**os.environ, "KUBECONFIG": str(door.kubeconfig)})
    view.refused  # [("DELETE", "/api/v1/namespaces/ns/pods/x")]

A view listens on Unix sockets only, in a folder only the grader's user may enter: a sandboxed script reaches it
through its own forwarder inside its own network namespace. Only a run without a sandbox gets a loopback TCP
door, its own, open for that run alone and answering only under the secret path its kubeconfig names.
"""

from __future__ import annotations

import itertools
import json
import secrets
import shutil
import socket
import socketserver
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster.upstream import Upstream
from .doctor import Doctor, PodKey
from .view_proxy import MAX_CONNECTIONS, Write, _Proxy, _TcpServer, _UnixProxy, _UnixServer

# What a view can make of the API server, to try a checker on a failing one: every request answered
# 503 Service Unavailable. (An unreachable one needs no view: the runner gives the script a kubeconfig
# and nothing behind it.)
FAULTS = ("unavailable",)


@dataclass
class Door:
    """One run's way into the view: its own Unix socket (and, without a sandbox, its own loopback
    kubeconfig), so the writes it tried are its own (``writes``: (method, path))."""

    socket: Path | None  # None: nothing answers (an unreachable API server)
    kubeconfig: Path | None
    writes: list[Write] = field(default_factory=list)
    token: str | None = None  # a TCP door's secret, the path of its kubeconfig's server URL, in that file alone


@contextmanager
def closed_door(folder: Path) -> Iterator[Door]:
    """An API server that cannot be reached: a kubeconfig naming a loopback port held bound but never
    listening (every connection refused at once), and no socket, so a sandbox starts no forwarder.

    Example:: with closed_door(tmp) as door: run(script, env={"KUBECONFIG": str(door.kubeconfig)})
    """
    folder.mkdir(parents=True, exist_ok=True)
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        held.bind(("127.0.0.1", 0))
        kubeconfig = folder / "unreachable-kubeconfig.yaml"
        kubeconfig.write_text(DoctoredView._config(held.getsockname()[1], None))
        yield Door(None, kubeconfig)
    finally:
        held.close()


class DoctoredView:
    """A read-only proxy of the cluster at ``kubeconfig`` that hides ``hidden_pods`` ((namespace, name)) and
    shows each node named in ``taints`` with those taints too (a state the lab's own steps may not reach).

    It serves on Unix sockets only (``socket``, and one per :meth:`door`, in a folder only the grader's user may
    enter), which the sandbox binds into a script's network namespace.

    Example:: with DoctoredView(live.source, {("ns", "pod")}, tmp) as view: runs.run("ns", cluster=True, view=view)
    """

    def __init__(
        self,
        kubeconfig: str | Path,
        hidden_pods: Iterable[PodKey],
        work_dir: Path,
        *,
        fault: str | None = None,
        taints: Mapping[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"a view's fault is one of {FAULTS}, not {fault!r}")
        self.fault = fault
        self.upstream = Upstream(kubeconfig)
        hidden = set(hidden_pods)
        self.doctor = Doctor(hidden, self._owners(hidden) if fault is None else Counter(), taints)
        self.work_dir = Path(work_dir)
        self.refused: list[Write] = []
        self._doors = itertools.count(1)
        self.errors = 0  # requests whose handling failed (a malformed request, a client gone)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._socket_dir: str | None = None

    def doctors(self, path: str) -> bool:
        """Whether a body read at (canonical) ``path`` is looked at: every one but the API's documents,
        whatever its path, since a Pod or an Event is known by its kind."""
        return bool(self.doctor.hidden or self.doctor.taints) and not path.startswith(
            ("/openapi", "/version", "/healthz", "/readyz")
        )

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

    def _serve(self, server: socketserver.BaseServer, writes: list[Write]) -> threading.Thread:
        server.view, server.writes = self, writes  # type: ignore[attr-defined]
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="doctored-view", daemon=True
        )  # shutdown() waits for the loop's next look
        thread.start()
        return thread

    def _start(self, server: socketserver.BaseServer) -> None:
        self._threads.append(self._serve(server, self.refused))
        self._servers.append(server)

    @contextmanager
    def door(self, *, tcp: bool = False) -> Iterator[Door]:
        """A run's own socket into the view (and, with ``tcp``, its own loopback kubeconfig), closed after:
        what the run tried to write is in ``door.writes``, and in ``refused`` with every other run's.

        Example:: with view.door() as door: ...; assert not door.writes
        """
        assert self._socket_dir is not None, "enter the view first"
        number = next(self._doors)
        path = Path(self._socket_dir) / f"door-{number}.sock"
        door = Door(path, None)
        servers: list[socketserver.BaseServer] = [_UnixServer(str(path), _UnixProxy)]
        if tcp:  # a run without a sandbox: its own port, answering only under its own secret path
            loopback = _TcpServer(("127.0.0.1", 0), _Proxy)
            loopback.token = door.token = secrets.token_urlsafe(32)
            servers.append(loopback)
            self.work_dir.mkdir(parents=True, exist_ok=True)
            door.kubeconfig = self.work_dir / f"door-{number}-kubeconfig.yaml"
            door.kubeconfig.touch(mode=0o600)
            door.kubeconfig.write_text(self._config(loopback.server_address[1], door.token))
        threads = [self._serve(server, door.writes) for server in servers]
        try:
            yield door
        finally:
            for server, thread in zip(servers, threads, strict=True):
                server.shutdown()
                server.server_close()
                thread.join(timeout=10)
            path.unlink(missing_ok=True)
            if door.kubeconfig is not None:
                door.kubeconfig.unlink(missing_ok=True)

    def __enter__(self) -> DoctoredView:
        self._socket_dir = tempfile.mkdtemp(prefix="gpulab-view-")  # 0700: the grader's user alone enters
        try:
            self._start(_UnixServer(str(self.socket), _UnixProxy))
        except BaseException:  # a Ctrl-C while it starts: no __exit__ follows, so its folder goes now
            self.__exit__(None, None, None)
            raise
        return self

    @staticmethod
    def _config(port: int, token: str | None) -> str:
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "view",
            "clusters": [{"name": "view", "cluster": {"server": f"http://127.0.0.1:{port}/{token or ''}".rstrip("/")}}],
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
