"""The read-only view's HTTP side: a proxy handler that forwards reads (GET, HEAD) to the API server,
doctored, refuses every write with 405 and records it, and the bounded servers it runs in, on Unix sockets
(and, for a run without a sandbox, a loopback TCP door that answers only under its secret path). A server carries its view (``server.view``) and the list its writes go to
(``server.writes``: one per door, so a run's writes are its own)."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import secrets
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .doctor import OWN_HEADERS, POD_PATH, canonical, json_accept, status

if TYPE_CHECKING:
    from .clusterview import DoctoredView

# At most this many requests in flight (watches included) per server: more are closed at once, so a
# script cannot tie the grader's threads and API connections up after its run.
MAX_CONNECTIONS = 64
Write = tuple[str, str]  # a refused request: (method, path)
UNSAFE_PATH = re.compile(r"[\x00-\x20\x7f-\uffff]")  # a byte the API server's client would refuse to send
# The subresources for which the API server itself dials out (to a Pod's, a Service's or a node's address, which a
# snapshot may set to the host's loopback or a metadata service) or reaches a kubelet: a checker reads objects only.
DIALS = re.compile(
    r"^/api/v1/(?:namespaces/[^/]+/(?:pods|services)|nodes)/[^/]+/(?:proxy|portforward|exec|attach|log)(?:/|$)"
    r"|^/api/v1/proxy(?:/|$)"
)


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
        if not self._let_in():
            return
        self.view.refused.append((self.command, self.path))
        if self.server.writes is not self.view.refused:  # type: ignore[attr-defined]
            self.server.writes.append((self.command, self.path))  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, 1 << 20))
        if self._faulted():
            return
        message = "this view of the cluster is read-only: the grader refuses every change"
        self._send(405, status(405, "MethodNotAllowed", message))

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _refuse

    def do_HEAD(self) -> None:
        self.do_GET()

    def _faulted(self) -> bool:
        """A view made to fail answers 503 to everything."""
        if self.view.fault == "unavailable":
            self._send(503, status(503, "ServiceUnavailable", "the API server is unavailable"))
        return self.view.fault is not None

    def _let_in(self) -> bool:
        """A TCP door answers only under its run's secret path (kubectl sends no bearer token over plain HTTP, so
        the secret is the server URL's path in that run's kubeconfig): another process of the machine that finds
        its port gets 401, and nothing of the cluster. The path is taken off before the request goes on."""
        token = getattr(self.server, "token", None)
        if token is None:
            return True
        prefix = f"/{token}"
        if (
            secrets.compare_digest(self.path[: len(prefix)], prefix)
            and self.path[len(prefix) : len(prefix) + 1] in "/?"
        ):
            self.path = self.path[len(prefix) :] or "/"
            return True
        self._send(401, status(401, "Unauthorized", "this door of the view is another run's"))
        return False

    def do_GET(self) -> None:
        if not self._let_in() or self._faulted():
            return
        if UNSAFE_PATH.search(self.path):
            self._send(400, status(400, "BadRequest", "the path holds a character a URL may not"))
            return
        path = canonical(urlsplit(self.path).path)
        if DIALS.match(path):
            what = "a Pod's logs, a proxy, a port-forward, exec and attach"
            self._send(403, status(403, "Forbidden", f"this view of the cluster serves objects only, not {what}"))
            return
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
    token: str | None = None  # the secret path a request must start with


class _UnixServer(_Bounded, socketserver.UnixStreamServer):
    pass
