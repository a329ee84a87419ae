"""A fresh lab cluster brought to Ready, read in-process: no kubectl process per poll.

kwokctl returns once the API server serves. The lab's nodes are created at once, while
the API server finishes its post-start hooks (system priority classes, RBAC roles):
then /readyz answers, the kwok controller has the nodes Ready, and the ``default``
ServiceAccount exists. That one the controller manager would make a moment later; it is
made here the same way (``default/default``, nothing else in it), so the first Pod of a
test need not wait for the controller manager's start. Usable without pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..labs.errors import ApiError, TransportError
from ..labs.labfile import HOSTNAME_LABEL, NodeSpec

JSON = {"Accept": "application/json", "Content-Type": "application/json"}
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
CONFLICT = 409  # AlreadyExists: made meanwhile, by a controller or an earlier attempt


def _schedulable(node: dict[str, Any]) -> bool:
    """Ready, and rid of the not-ready taint the API server gives a new node (the controller manager
    lifts it): until then the scheduler places nothing there."""
    conditions = node.get("status", {}).get("conditions", [])
    taints = node.get("spec", {}).get("taints", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) and not any(
        t.get("key") in NOT_READY_TAINTS for t in taints
    )


class Bringup:
    """The checks and first writes of a cluster's start, against its kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        from .transport import Transport  # the kubernetes client is slow to import: only when a cluster starts

        self.transport = Transport(str(kubeconfig), retries=0)

    def _get(self, path: str, query: dict[str, str] | None = None, *, raw: bool = False) -> Any:
        try:
            return self.transport.request("GET", path, query or {}, JSON, None, 5, raw=raw)
        except (ApiError, TransportError):
            return None

    def _create(self, path: str, manifest: dict[str, Any]) -> None:
        try:
            self.transport.request("POST", path, {}, JSON, manifest, 10)
        except ApiError as error:
            if error.status != CONFLICT:
                raise

    def get(self, path: str) -> Any:
        """The object at ``path``, or None when it cannot be read (yet)."""
        return self._get(path)

    def items(self, path: str) -> list[dict[str, Any]] | None:
        """A list's items, or None when it cannot be read (yet)."""
        found = self._get(path)
        return None if found is None else list(found.get("items") or [])

    def uid(self, path: str) -> str | None:
        """The object's uid, or None when it cannot be read."""
        found = self._get(path)
        return None if found is None else (found.get("metadata") or {}).get("uid")

    def merge_patch(self, path: str, patch: dict[str, Any]) -> bool:
        """Whether the patch was taken (not if the object changed or went meanwhile)."""
        headers = {"Accept": "application/json", "Content-Type": "application/merge-patch+json"}
        try:
            self.transport.request("PATCH", path, {}, headers, patch, 10)
        except (ApiError, TransportError):
            return False
        return True

    def serving(self) -> bool:
        return self._get("/version") is not None

    def ready(self) -> bool:
        return self._get("/readyz", raw=True) is not None

    def create_nodes(self, nodes: Sequence[NodeSpec]) -> None:
        for node in nodes:
            self._create("/api/v1/nodes", node.manifest())

    def nodes_ready(self, names: Sequence[str]) -> bool:
        if not names:
            return True
        found = self._get("/api/v1/nodes", {"labelSelector": f"{HOSTNAME_LABEL} in ({','.join(names)})"})
        ready = {item["metadata"]["name"] for item in (found or {}).get("items", []) if _schedulable(item)}
        return set(names) <= ready

    def default_service_account(self) -> bool:
        """Whether ``default/default`` exists, made here when it does not yet."""
        path = "/api/v1/namespaces/default/serviceaccounts"
        if self._get(f"{path}/default") is None:
            try:
                self._create(path, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
            except (ApiError, TransportError):
                return False
        return True

    def close(self) -> None:
        self.transport.close()
