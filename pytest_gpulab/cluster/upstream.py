"""The real API server, for a proxy in front of it: reads with the kubeconfig's own address and
credentials, on kept-alive connections. Usable without pytest."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .environ import client_configuration


class Upstream:
    """The real API server, reached with the kubeconfig's own address and credentials."""

    def __init__(self, kubeconfig: str | Path) -> None:
        from kubernetes import config as k8s_config  # slow to import: only once a view is made

        configuration = client_configuration()
        k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        address = urlsplit(configuration.host)
        self.host, self.port = address.hostname or "127.0.0.1", address.port or 443
        self.context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if not configuration.verify_ssl:
            self.context.check_hostname, self.context.verify_mode = False, ssl.CERT_NONE
        if configuration.cert_file:
            self.context.load_cert_chain(configuration.cert_file, configuration.key_file)
        token = (configuration.api_key or {}).get("authorization")
        self.auth = {"Authorization": token} if token else {}
        self._idle: list[http.client.HTTPSConnection] = []  # kept alive: a TLS handshake costs more than a read
        self._lock = threading.Lock()

    def _connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)

    def read(self, method: str, path: str, headers: dict[str, str]) -> tuple[http.client.HTTPResponse, bytes]:
        """The whole answer, on a kept-alive connection; one that the server closed meanwhile is replaced."""
        for attempt in (1, 2):
            with self._lock:
                connection = self._idle.pop() if self._idle else self._connect()
            try:
                connection.request(method, path, headers={**headers, **self.auth})
                response = connection.getresponse()
                body = response.read()
            except (http.client.HTTPException, OSError):
                connection.close()
                if attempt == 2:
                    raise
                continue
            if response.will_close:
                connection.close()
            else:
                with self._lock:
                    self._idle.append(connection)
            return response, body
        raise AssertionError("unreachable")

    def stream(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[http.client.HTTPResponse, Callable[[], None]]:
        """An answer read as it comes (a watch), on a connection of its own: it stays open. With it, a
        function that ends it from another thread (a reader blocked on it returns)."""
        connection = self._connect()
        connection.request(method, path, headers={**headers, **self.auth})
        sock = connection.sock

        def stop() -> None:
            with contextlib.suppress(OSError, AttributeError):
                sock.shutdown(socket.SHUT_RDWR)

        return connection.getresponse(), stop

    def get_json(self, path: str) -> Any:
        response, body = self.read("GET", path, {"Accept": "application/json"})
        return json.loads(body) if response.status == 200 else None

    def close(self) -> None:
        with self._lock:
            for connection in self._idle:
                connection.close()
            self._idle.clear()
