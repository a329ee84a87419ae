"""Read-only access to the learner's lab cluster.

:class:`LiveCluster` only ever sends GET requests: the grader never creates,
changes or deletes a cluster object. Objects come back as plain dicts, exactly
as the API server serves them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from .feedback import fail
from .waiting import wait_until

REQUEST_TIMEOUT = 10


class ClusterUnreachable(RuntimeError):
    """The kubeconfig could not be loaded or the API server did not answer."""


class LiveCluster:
    def __init__(self, api_client: k8s_client.ApiClient, source: str) -> None:
        self.api_client = api_client
        self.source = source  # where the connection came from, for messages

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None) -> "LiveCluster":
        """``kubeconfig`` may be a path or a ``:``-separated list, as in ``KUBECONFIG``."""
        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, ValueError, TypeError) as error:
            raise ClusterUnreachable(f"the kubeconfig {kubeconfig or '~/.kube/config'} could not be loaded ({error})") from None
        configuration.retries = 1
        return cls(k8s_client.ApiClient(configuration), kubeconfig or "~/.kube/config")

    def _request(self, path: str, query: dict[str, str] | None = None) -> Any:
        method, url, headers, _, _ = self.api_client.param_serialize(
            "GET", path, query_params=list((query or {}).items()),
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(method, url, header_params=headers, _request_timeout=REQUEST_TIMEOUT)
        response.read()
        if response.status >= 400:
            raise ApiException(status=response.status, reason=response.reason)
        return json.loads(response.data)

    def probe(self) -> str:
        """The server's version, or :class:`ClusterUnreachable` saying why not."""
        try:
            return self._request("/version").get("gitVersion", "unknown")
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise ClusterUnreachable(f"the API server at {self.api_client.configuration.host} did not answer ({reason})") from None

    def get(self, path: str, **query: str) -> dict[str, Any] | None:
        """The object at ``path`` (e.g. ``/api/v1/nodes/lab-node-0``), or None if it does not exist.

        Any other failure (the API server stopped, a refusal, an answer that is not JSON) fails
        the step with a sentence, never a traceback.
        """
        try:
            return self._request(path, query)
        except ApiException as error:
            if error.status == 404:
                return None
            problem = f"answered {error.status} {error.reason}"
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            problem = f"did not answer ({getattr(error, 'reason', None) or error})"
        fail(
            f"The lab cluster {problem} when the grader read {path}. Check that it is still running "
            "(kubectl get nodes), then grade again.",
            detail={"path": path, "host": self.api_client.configuration.host},
        )

    def list(self, path: str, **query: str) -> list[dict[str, Any]]:
        """The items of the list at ``path``; ``query`` e.g. ``labelSelector=...``."""
        return (self.get(path, **query) or {}).get("items", [])

    def wait_for(self, path: str, predicate: Callable[[dict[str, Any] | None], bool], timeout: float) -> dict[str, Any] | None:
        """Poll the object at ``path`` until ``predicate`` holds; the last object read either way."""
        last: list[dict[str, Any] | None] = [None]

        def check() -> bool:
            last[0] = self.get(path)
            return predicate(last[0])

        wait_until(check, timeout, interval=0.5)
        return last[0]

    def close(self) -> None:
        self.api_client.close()
