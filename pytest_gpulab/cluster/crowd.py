"""A crowd of extra fake nodes and Pods around a lab, as in a big real cluster. Usable without pytest.

A grading must not read more as the cluster grows: ``tests/test_scale.py`` and
``bench/grading_speed.py`` grade a lab with and without a crowd. The crowd stays out of the
lab's way: its nodes carry none of the lab's labels, its Pods live in namespaces of
their own, bound by ``spec.nodeName`` to crowd nodes (kwok runs them), and with
``taint=True`` its nodes refuse the lab's own Pods and DaemonSets.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..labs.waiting import wait_until
from .kwok import KwokCluster, KwokClusterError

LABEL = "gpulab.dev/crowd"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
NAMESPACES = 10
CHUNK = 250  # objects per kubectl call; calls run side by side


def _node(index: int, taint: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"crowd-node-{index:05d}",
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {LABEL: "true", "type": "kwok", "kubernetes.io/hostname": f"crowd-node-{index:05d}"},
        },
        "spec": {"taints": [TAINT]} if taint else {},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }  # fmt: skip


def _pod(index: int, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"crowd-{index:06d}",
            "namespace": f"crowd-{index % NAMESPACES}",
            "labels": {LABEL: "true"},
        },
        "spec": {
            "nodeName": f"crowd-node-{index % nodes:05d}",
            "tolerations": [{"key": LABEL, "operator": "Exists"}],
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def _create(cluster: KwokCluster, items: list[dict[str, Any]]) -> None:
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    cluster.kubectl("create", "-f", "-", "-o", "name", input=manifest, timeout=600)


def _create_all(cluster: KwokCluster, items: list[dict[str, Any]], parallel: int) -> None:
    chunks = [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(lambda chunk: _create(cluster, chunk), chunks))


def _all_running(cluster: KwokCluster) -> bool:
    path = f"/api/v1/pods?labelSelector={LABEL}%3Dtrue&fieldSelector=status.phase%21%3DRunning&limit=1"
    answer = cluster.kubectl("get", "--raw", path, check=False)
    return answer.returncode == 0 and not json.loads(answer.stdout).get("items")


def add_crowd(cluster: KwokCluster, nodes: int, pods: int, *, taint: bool = True, parallel: int = 4) -> None:
    """``nodes`` extra Ready nodes and ``pods`` Running Pods on them; returns once kwok runs them all."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"crowd-{n}"}} for n in range(NAMESPACES)
    ]
    _create_all(cluster, namespaces + [_node(index, taint) for index in range(nodes)], parallel)
    _create_all(cluster, [_pod(index, nodes) for index in range(pods)], parallel)
    if not wait_until(lambda: _all_running(cluster), timeout=60 + pods / 20, interval=1.0):
        raise KwokClusterError(f"kwok did not run the crowd's {pods} Pods in time")
