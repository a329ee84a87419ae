"""The official kubernetes client under :class:`pytest_gpulab.grading.live.LiveCluster`.

Imported only when a grading first reads the cluster (and warmed up in the background
beforehand): the client takes about a third of a second to import, more than a
whole grading of files. Usable without pytest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from ..labs.errors import ApiError, ConfigError, TransportError
from .environ import client_configuration

DEFAULT_KUBECONFIG = "~/.kube/config"  # the client's, when neither a path nor KUBECONFIG names one

_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError, ValueError)


class Transport:
    """Requests to the API server named by a kubeconfig, with its credentials."""

    def __init__(self, kubeconfig: str | None, retries: int = 1) -> None:
        configuration = client_configuration()
        # The client's own default is KUBECONFIG as it was when the client was imported; read it now (a grading
        # forked from a warm server, cohort/warm.py, imported the client under another environment).
        config_file = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        try:
            k8s_config.load_kube_config(config_file=config_file, client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, ValueError, TypeError) as error:
            raise ConfigError(str(error)) from None
        configuration.retries = retries
        self.api_client = k8s_client.ApiClient(configuration)
        self.requests = self.received = 0  # for LiveCluster.reads and .received

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def _call(
        self, method: str, path: str, query: list[tuple[str, str]], headers: Mapping[str, str], body: Any, timeout: Any
    ) -> Any:
        """The client's response, its body not yet read; the client's errors in our words."""
        self.requests += 1
        try:
            method, url, sent, data, _ = self.api_client.param_serialize(
                method, path, query_params=query, header_params=dict(headers), body=body, auth_settings=["BearerToken"]
            )
            response = self.api_client.call_api(method, url, header_params=sent, body=data, _request_timeout=timeout)
        except ApiException as error:
            if not error.status:  # the client's word for a TLS failure: no answer came
                raise TransportError(str(error.reason)) from None
            raise ApiError(error.status, str(error.reason), error.body) from None
        except _TRANSPORT_ERRORS as error:
            raise TransportError(str(getattr(error, "reason", None) or error)) from None
        if response.status >= 400:
            raise ApiError(response.status, str(response.reason), self._read(response))
        return response

    def _read(self, response: Any) -> bytes:
        try:
            data = bytes(response.read() or b"")
        except _TRANSPORT_ERRORS as error:
            raise TransportError(str(getattr(error, "reason", None) or error)) from None
        self.received += len(data)
        return data

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: Any,
        timeout: float,
        *,
        raw: bool = False,
    ) -> Any:
        """The JSON answer (the bytes with ``raw``); :class:`ApiError` for an HTTP error,
        :class:`TransportError` when none came."""
        data = self._read(self._call(method, path, list(query.items()), headers, body, timeout))
        return data if raw else json.loads(data or b"null")

    def watch(
        self,
        path: str,
        query: Mapping[str, str],
        idle: float,
        opened: Callable[[Callable[[], None]], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The watch's events as they come; it ends when the server closes it or ``idle`` seconds pass
        without one (the object is at rest). ``opened`` is handed a function that ends the watch from another
        thread (the connection is shut down; the iteration then ends or raises TransportError)."""
        response = self._call(
            "GET", path, [*query.items(), ("watch", "1")], {"Accept": "application/json"}, None, (5, idle)
        )
        if opened is not None:
            opened(response.response.shutdown)
        try:
            for line in iter_resp_lines(response.response):
                self.received += len(line)
                if line:
                    yield json.loads(line)
        except urllib3.exceptions.ReadTimeoutError:
            return
        except _TRANSPORT_ERRORS as error:
            raise TransportError(str(getattr(error, "reason", None) or error)) from None
        finally:  # as the client's own Watch ends one: the connection is not reused half-read
            response.response.close()
            response.response.release_conn()

    def close(self) -> None:
        self.api_client.close()
