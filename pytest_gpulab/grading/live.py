"""Read-only access to the learner's lab cluster, by kind and name.

:class:`LiveCluster` reads with GET only; the grader never creates, changes
or deletes a cluster object. The one other request it can make is a
server-side dry run (``dryRun=All``), which the API server validates and
discards: it tells a learner why their manifest was refused, and persists
nothing. Objects come back as plain dicts, exactly as the API server serves them.

    live.get("DaemonSet", "gpu-operator/nvidia-container-toolkit")
    live.list("Pod", namespace="gpu-operator", labels="app=nvidia-container-toolkit")
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..labs.errors import ApiError, ConfigError, TransportError
from ..labs.kinds import DISCOVERY_ACCEPT, Resource, from_discovery, known
from . import evidence
from .feedback import GradingError
from .parsing import dig

if TYPE_CHECKING:
    from ..cluster.transport import Transport

REQUEST_TIMEOUT = 10
QUIET_SECONDS = 5  # kwok's Pods and the controllers move within a second; five still is at rest


class ClusterUnreachable(RuntimeError):
    """The kubeconfig could not be loaded or the API server did not answer."""


def split_name(name: str, namespace: str | None = None) -> tuple[str | None, str]:
    """``"gpu-lab/cuda-probe"`` -> ("gpu-lab", "cuda-probe"); a bare name keeps ``namespace``."""
    if "/" in name:
        namespace, name = name.split("/", 1)
    return namespace, name


def selector(labels: Mapping[str, str] | str | None) -> str | None:
    """A label selector string from ``{"app": "x"}`` (or one already written)."""
    if labels is None or isinstance(labels, str):
        return labels
    return ",".join(f"{key}={value}" for key, value in labels.items())


def owned_by(objects: list[dict[str, Any]], owner: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The objects whose ownerReferences name ``owner`` (by uid)."""
    uid = (owner.get("metadata") or {}).get("uid")
    return [
        obj
        for obj in objects
        if any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])
    ]


def warm_up(*, freeze: bool = False) -> None:
    """Import the kubernetes client now, before the first check; with ``freeze``, its modules, which live as
    long as the process, are then kept out of the garbage collector's way. Not in the background: pytest's log
    capture walks the logging module's loggers without its lock as each check starts, and an import adding
    loggers meanwhile made a check fail with "dictionary changed size during iteration". A client that does
    not import is reported by the check that reads the cluster."""
    try:
        from ..cluster import transport  # noqa: F401  (the import is the work)
    except ImportError:
        return
    if freeze:
        gc.freeze()


class LiveCluster:
    def __init__(self, transport: Transport, source: str) -> None:
        self.transport = transport
        self.source = source  # where the connection came from, for messages
        self._discovered: list[Resource] | None = None

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None) -> LiveCluster:
        """``kubeconfig`` may be a path or a ``:``-separated list, as in ``KUBECONFIG``."""
        from ..cluster.transport import (
            Transport,  # the kubernetes client is slow to import: only when the cluster is read
        )

        try:
            transport = Transport(kubeconfig)
        except ConfigError as error:
            raise ClusterUnreachable(
                f"the kubeconfig {kubeconfig or '~/.kube/config'} could not be loaded ({error})"
            ) from None
        return cls(transport, kubeconfig or "~/.kube/config")

    @property
    def host(self) -> str:
        return self.transport.host

    @property
    def reads(self) -> int:
        """Requests sent (a watch is one): a grading's count must not grow with the cluster's size."""
        return self.transport.requests

    @property
    def received(self) -> int:
        """Bytes of answers: nor may this, as it would if the grader listed every node or Pod."""
        return self.transport.received

    def _request(
        self, path: str, query: Mapping[str, str] | None = None, *, body: Any = None, accept: str = "application/json"
    ) -> Any:
        method = "GET" if body is None else "POST"
        if method != "GET" and (query or {}).get("dryRun") != "All":
            raise PermissionError("the grader is read-only: only GET and server-side dry runs are sent")
        headers = {"Accept": accept, **({"Content-Type": "application/json"} if body is not None else {})}
        return self.transport.request(method, path, query or {}, headers, body, REQUEST_TIMEOUT)

    def _read(self, path: str, query: Mapping[str, str] | None = None, **options: Any) -> Any:
        """``_request``, with a failure the learner can act on when the cluster misbehaves; None for 404."""
        try:
            return self._request(path, query, **options)
        except ApiError as error:
            if error.status == 404:
                return None
            problem = f"answered {error.status} {error.reason}"
        except TransportError as error:
            problem = f"did not answer ({error})"
        raise GradingError(
            f"The lab cluster at {self.host} (kubeconfig {self.source}) {problem} when the grader read {path}. "
            "Check that it is still running (kubectl get nodes), then grade again.",
            detail={"path": path, "host": self.host},
        )

    def probe(self) -> str:
        """The server's version, or :class:`ClusterUnreachable` saying why not."""
        try:
            return str(self._request("/version").get("gitVersion", "unknown"))
        except (ApiError, TransportError) as error:
            raise ClusterUnreachable(f"the API server at {self.host} did not answer ({error})") from None

    def resource(self, kind: str, group: str | None = None) -> Resource | None:
        """Where ``kind`` lives; custom resources from discovery, read once (again after a miss)."""
        found = known(kind, group)
        if found is None:
            for fresh in (False, True):
                if fresh or self._discovered is None:
                    self._discovered = from_discovery(
                        self._read(path, accept=DISCOVERY_ACCEPT) for path in ("/api", "/apis")
                    )
                found = next((r for r in self._discovered if r.answers_to(kind) and group in (None, r.group)), None)
                if found:
                    break
        return found

    def get_path(self, path: str, **query: str) -> dict[str, Any] | None:
        """The object at a raw API path, or None if it does not exist."""
        result = self._read(path, query)
        return result if isinstance(result, dict) else None

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The ``kind`` object ``name`` (``"namespace/name"`` for a namespaced one), or None."""
        namespace, name = split_name(name, namespace)
        resource = self.resource(kind)
        found = self.get_path(resource.path(name, namespace)) if resource else None
        evidence.note_object(kind, found, namespace, name)
        return found

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        labels: Mapping[str, str] | str | None = None,
        fields: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The ``kind`` objects in ``namespace`` (all namespaces if None), by label and field selector; with
        ``limit``, the first so many in the API server's order (by name), so a read cannot grow with the cluster."""
        resource = self.resource(kind)
        query = {key: value for key, value in (("labelSelector", selector(labels)), ("fieldSelector", fields)) if value}
        if limit is not None:
            query["limit"] = str(limit)
        items = (self.get_path(resource.path(namespace=namespace), **query) or {}).get("items", []) if resource else []
        found = [item for item in items if isinstance(item, dict)]
        evidence.note_list(kind, namespace, query, found)
        return found

    def wait_for(
        self,
        kind: str,
        name: str,
        predicate: Callable[[dict[str, Any] | None], bool],
        timeout: float,
        namespace: str | None = None,
        *,
        quiet: float = QUIET_SECONDS,
    ) -> dict[str, Any] | None:
        """The object once ``predicate`` holds, watched rather than polled: it answers as soon as the
        object changes. The wait ends at ``timeout``, or sooner once the object has not changed for
        ``quiet`` seconds (the controllers are done with it); the last state seen either way. An
        object that does not exist is not waited for: only the learner makes a named object appear."""
        namespace, name = split_name(name, namespace)
        resource = self.resource(kind)
        last = self.get_path(resource.path(name, namespace)) if resource else None
        if resource is None or last is None or timeout <= 0 or predicate(last):
            evidence.note_object(kind, last, namespace, name)
            return last
        query = {"fieldSelector": f"metadata.name={name}", "timeoutSeconds": str(max(1, math.ceil(timeout)))}
        query["resourceVersion"] = str(dig(last, "metadata", "resourceVersion") or "")
        deadline = time.monotonic() + timeout
        try:
            for event in self.transport.watch(resource.path(namespace=namespace), query, idle=min(quiet, timeout)):
                if event.get("type") == "ERROR":  # e.g. 410 Gone: the state read above stands
                    break
                last = None if event.get("type") == "DELETED" else event.get("object")
                if predicate(last) or time.monotonic() >= deadline:
                    break
        except (ApiError, TransportError):
            last = self.get_path(resource.path(name, namespace))
        evidence.note_object(kind, last, namespace, name)
        return last

    def refusal(self, manifest: Mapping[str, Any]) -> str | None:
        """Why the API server would refuse to create ``manifest`` (a server-side dry run), or None."""
        api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
        group, _, version = api_version.rpartition("/")
        resource = self.resource(kind, group) if version else None
        if resource is None:
            return f"the API server serves no kind {kind or '(none)'} in apiVersion {api_version or '(none)'}"
        namespace = (
            (manifest.get("metadata") or {}).get("namespace") if isinstance(manifest.get("metadata"), dict) else None
        )
        try:
            self._request(
                resource.path(namespace=namespace or "default", version=version), {"dryRun": "All"}, body=dict(manifest)
            )
        except ApiError as error:
            return error.message()
        except TransportError:
            return None
        return None

    def close(self) -> None:
        self.transport.close()
