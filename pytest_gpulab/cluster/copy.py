"""A copy of a lab cluster with objects added that the lab itself never makes: the near misses a checker must
tell apart (a node whose label has another value, a Pod that only looks like a DaemonSet's, a pool whose
conditions come in another order, a node that is not Ready).

The copy is the cluster's etcd snapshot restored into a frozen cluster of its own (``snapshot.py``): a
real API server, so every way a script may read it (lists, tables, selectors, jsonpath) answers as a
cluster does, and the learner's own cluster is never changed. Each object is created as written, then
its ``status`` set through the status subresource, as a controller would have. Usable without pytest.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

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


# What kubectl says of an object this cluster cannot hold yet: its kind not served (a custom resource whose
# definition the learner has not applied) or its namespace not made. Such a near miss is left out: the copy is
# the learner's cluster as it is, and every answer is computed on it.
NOT_YET = ("no matches for kind", "resource mapping not found", 'namespaces "')


def add_objects(cluster: KwokCluster, objects: Sequence[dict[str, Any]]) -> list[str]:
    """Create each object, then set its status as written; those the cluster cannot hold yet are left out and
    returned (kind/name)."""
    left_out = []
    for written in objects:
        obj = {key: value for key, value in written.items() if key != "status"}
        created = cluster.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
        if created.returncode != 0:
            if any(words in created.stderr for words in NOT_YET):
                left_out.append(f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}")
                continue
            raise KwokClusterError(f"a near-miss object could not be made: {created.stderr.strip()}")
        if written.get("status"):
            meta = obj.get("metadata") or {}
            where = ["-n", str(meta["namespace"])] if meta.get("namespace") else []
            api, kind = str(obj.get("apiVersion", "v1")), str(obj.get("kind")).lower()
            target = f"{kind}.{api.split('/')[0]}" if "/" in api else kind
            cluster.kubectl(
                "patch", target, str(meta.get("name")), *where, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": written["status"]}),
            )  # fmt: skip
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
