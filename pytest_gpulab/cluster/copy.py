"""A copy of a lab cluster with objects added that the lab itself never makes: the near misses a checker must
tell apart (a node whose label has another value, a Pod that only looks like a DaemonSet's, a pool whose
conditions come in another order, a node that is not Ready).

The copy is the cluster's etcd snapshot restored into a frozen cluster of its own (``snapshot.py``): a
real API server, so every way a script may read it (lists, tables, selectors, jsonpath) answers as a
cluster does, and the learner's own cluster is never changed. Each object is created as written, then
its ``status`` set through the status subresource, as a controller would have. Usable without pytest.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from ..labs.errors import ApiError, TransportError
from . import snapshot
from .kwok import KwokCluster, KwokClusterError


def manifests_in(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Every object of these YAML files, in order."""
    found: list[dict[str, Any]] = []
    for path in paths:
        try:
            found += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(doc, dict)]
        except (OSError, yaml.YAMLError) as error:
            raise KwokClusterError(f"the near-miss objects in {path} cannot be read: {error}") from None
    return found


NOT_FOUND = 404  # its namespace not made: a near miss the learner's cluster cannot hold yet
JSON = {"Accept": "application/json", "Content-Type": "application/json"}
MERGE = {"Accept": "application/json", "Content-Type": "application/merge-patch+json"}


class _Kinds:
    """Where each kind is served, read from the API server once per group and version (``/api/v1``, ``/apis/G/V``)."""

    def __init__(self, transport: Any) -> None:
        self.transport, self._lists = transport, dict[str, dict[str, tuple[str, bool]]]()

    def collection(self, obj: dict[str, Any]) -> str | None:
        """The path new objects of ``obj``'s kind are created at, or None when the cluster does not serve it."""
        version = str(obj.get("apiVersion", "v1"))
        base = f"/apis/{version}" if "/" in version else f"/api/{version}"
        if version not in self._lists:
            try:
                served = self.transport.request("GET", base, {}, JSON, None, 10) or {}
            except ApiError:  # the group is not served: a custom resource whose definition is not applied
                served = {}
            self._lists[version] = {
                item["kind"]: (item["name"], bool(item.get("namespaced")))
                for item in served.get("resources") or []
                if "/" not in item.get("name", "/")
            }
        found = self._lists[version].get(str(obj.get("kind")))
        if found is None:
            return None
        plural, namespaced = found
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"  # as kubectl places one
        return f"{base}/namespaces/{namespace}/{plural}" if namespaced else f"{base}/{plural}"


AGO = re.compile(r"\$\{now(?:-(\d+)([smhd]))?\}")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def dated(value: Any, now: datetime) -> Any:
    """``value`` with each string ``${now}`` or ``${now-2h}`` (s, m, h, d) made the time that long before ``now``,
    as Kubernetes writes a timestamp (``2026-12-07T10:30:00Z``): a near miss whose age matters stays as old,
    relative to its copy, as the years pass."""
    if isinstance(value, dict):
        return {key: dated(item, now) for key, item in value.items()}
    if isinstance(value, list):
        return [dated(item, now) for item in value]
    if isinstance(value, str) and (match := AGO.fullmatch(value)):
        ago = int(match.group(1) or 0) * UNIT_SECONDS[match.group(2) or "s"]
        return (now - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def _set_status(cluster: KwokCluster, path: str, status: dict[str, Any]) -> None:
    """Through the status subresource; where the kind has none (a CRD the learner wrote without it), status is a
    field of the object like any other, and is set on the object itself."""
    try:
        cluster.api.transport.request("PATCH", f"{path}/status", {}, MERGE, {"status": status}, 10)
    except ApiError as error:
        if error.status != NOT_FOUND:
            raise
        cluster.api.transport.request("PATCH", path, {}, MERGE, {"status": status}, 10)


def add_objects(cluster: KwokCluster, objects: Sequence[dict[str, Any]]) -> list[str]:
    """Create each object, then set its status as written (times written ``${now-2h}`` made relative to now: see
    :func:`dated`); those the cluster cannot hold yet (a kind it does not serve, a namespace not made) are left out
    and returned (kind/name). In-process: no kubectl per object."""
    kinds, left_out, now = _Kinds(cluster.api.transport), [], datetime.now(UTC)
    for written in (dated(obj, now) for obj in objects):
        obj = {key: value for key, value in written.items() if key != "status"}
        name = str((obj.get("metadata") or {}).get("name"))
        try:
            if (collection := kinds.collection(obj)) is None:
                left_out.append(f"{obj.get('kind')}/{name}")
                continue
            cluster.api.transport.request("POST", collection, {}, JSON, obj, 10)
            if written.get("status"):
                _set_status(cluster, f"{collection}/{name}", written["status"])
        except ApiError as error:
            if error.status == NOT_FOUND and "namespaces" in error.message():
                left_out.append(f"{obj.get('kind')}/{name}")
                continue
            raise KwokClusterError(f"a near-miss object could not be made: {error.message()}") from None
        except TransportError as error:
            raise KwokClusterError(f"a near-miss object could not be made: {error}") from None
    return left_out


@contextmanager
def copy_with(kubeconfig: str | Path, objects: Sequence[dict[str, Any]], work: Path) -> Iterator[KwokCluster]:
    """A frozen copy of the lab cluster ``kubeconfig`` names, ``objects`` added; stopped at the end.
    :class:`KwokClusterError` where the cluster is not one gpulab or kwokctl started (it cannot be saved)."""
    source = snapshot.cluster_for_kubeconfig(Path(kubeconfig))
    work.mkdir(parents=True, exist_ok=True)
    saved = work / "copy.db"
    snapshot.save(source, saved)
    with snapshot.grading_cluster(saved, name=f"gpulab-copy-{secrets.token_hex(4)}") as copy:
        add_objects(copy, objects)
        yield copy


class CopyAhead:
    """A copy (:func:`copy_with`) made in a thread of its own from now, while other work goes on: :meth:`result`
    waits for it (raising what its making raised), :meth:`close` stops it.

    Example:: ahead = CopyAhead(kubeconfig, objects, work); ...; copy = ahead.result(); ...; ahead.close()
    """

    def __init__(self, kubeconfig: str | Path, objects: Sequence[dict[str, Any]], work: Path) -> None:
        self._stack = ExitStack()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="gpulab-copy")
        self._made = self._pool.submit(self._stack.enter_context, copy_with(kubeconfig, objects, work))

    def result(self) -> KwokCluster:
        return self._made.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._stack.close()
