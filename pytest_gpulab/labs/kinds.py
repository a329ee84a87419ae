"""Where a kind of object lives in the API: ``DaemonSet`` -> ``/apis/apps/v1/.../daemonsets``.

The kinds the labs use are known here and cost no request; any other kind
(a custom resource) is looked up once in the cluster's aggregated discovery.
A kind may be written as ``DaemonSet``, ``daemonset``, ``daemonsets`` or, for
a custom resource, ``machineconfigpools.machineconfiguration.openshift.io``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

DISCOVERY_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, name: str | None = None, namespace: str | None = None, *, version: str | None = None) -> str:
        version = version or self.version
        base = f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{base}{scope}/{self.plural}" + (f"/{name}" if name else "")

    def answers_to(self, kind: str) -> bool:
        wanted = kind.lower()
        names = {self.kind.lower(), self.plural, self.kind.lower() + "s"}
        return wanted in names or (bool(self.group) and wanted in {f"{name}.{self.group}" for name in names})


def _core(plural: str, kind: str, namespaced: bool = True) -> Resource:
    return Resource("", "v1", plural, kind, namespaced)


KNOWN = (
    _core("namespaces", "Namespace", False),
    _core("nodes", "Node", False),
    _core("pods", "Pod"),
    _core("configmaps", "ConfigMap"),
    _core("secrets", "Secret"),
    _core("services", "Service"),
    _core("serviceaccounts", "ServiceAccount"),
    _core("events", "Event"),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True),
    Resource("apps", "v1", "deployments", "Deployment", True),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True),
    Resource("apps", "v1", "statefulsets", "StatefulSet", True),
    Resource("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    Resource("batch", "v1", "jobs", "Job", True),
    Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
)


def known(kind: str, group: str | None = None) -> Resource | None:
    """A kind this module knows, optionally only in ``group``."""
    return next((r for r in KNOWN if r.answers_to(kind) and (group is None or r.group == group)), None)


def _discovered(groups: Iterable[Any]) -> Iterator[Resource]:
    for group in groups:
        name = (group.get("metadata") or {}).get("name", "") if isinstance(group, dict) else ""
        for version in group.get("versions", []) if isinstance(group, dict) else []:
            for resource in version.get("resources", []):
                kind = (resource.get("responseKind") or {}).get("kind")
                if kind and "/" not in resource.get("resource", "/"):
                    yield Resource(
                        name, version["version"], resource["resource"], kind, resource.get("scope") == "Namespaced"
                    )


def from_discovery(documents: Iterable[Any]) -> list[Resource]:
    """Every resource in aggregated discovery documents (``/api`` and ``/apis``), preferred versions first."""
    return [resource for document in documents for resource in _discovered((document or {}).get("items", []))]
