"""The official kubernetes client under :class:`pytest_gpulab.live.LiveCluster`.

Imported only when a grading first reads the cluster (and warmed up in the background
beforehand): the client takes about a third of a second to import, more than a
whole grading of files. Usable without pytest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from .errors import ApiError, ConfigError, TransportError

_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError, ValueError)


class Transport:
    """Requests to the API server named by a kubeconfig, with its credentials."""

    def __init__(self, kubeconfig: str | None, retries: int = 1) -> None:
        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, ValueError, TypeError) as error:
            raise ConfigError(str(error)) from None
        configuration.retries = retries
        self.api_client = k8s_client.ApiClient(configuration)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def request(
        self, method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], body: Any, timeout: float
    ) -> Any:
        """The JSON answer; :class:`ApiError` for an HTTP error, :class:`TransportError` when none came."""
        try:
            method, url, sent, data, _ = self.api_client.param_serialize(
                method, path, query_params=list(query.items()), header_params=dict(headers), body=body,
                auth_settings=["BearerToken"],
            )  # fmt: skip
            response = self.api_client.call_api(method, url, header_params=sent, body=data, _request_timeout=timeout)
            response.read()
        except ApiException as error:
            if not error.status:  # the client's word for a TLS failure: no answer came
                raise TransportError(str(error.reason)) from None
            raise ApiError(error.status, str(error.reason), error.body) from None
        except _TRANSPORT_ERRORS as error:
            raise TransportError(str(getattr(error, "reason", None) or error)) from None
        if response.status >= 400:
            raise ApiError(response.status, str(response.reason), response.data)
        return json.loads(response.data or b"null")

    def close(self) -> None:
        self.api_client.close()
