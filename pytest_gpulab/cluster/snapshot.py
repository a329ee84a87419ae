"""A lab cluster saved and restored whole: kwokctl's etcd snapshot.

The etcd format keeps every object as it was, status, ControllerRevisions and
custom resources included; kwokctl's k8s format re-creates a chosen list of kinds
and loses a DaemonSet's revisions, which gpuop's step 8 grades (``bench/README.md``
has the measurement). Restoring replaces the whole state of a fresh cluster and
restarts its components. The snapshot's node leases name the kwok controller that held
them, which a new one would wait out (200 s); they are marked as held by nobody, as a node
agent that went away leaves them, so the grading cluster's kwok takes the nodes at once.
The cluster is ready again once the API server answers and every node's lease was renewed
since the restore. Usable without pytest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ..labs.waiting import wait_until
from .kwok import KwokCluster, KwokClusterError
from .kwokconfig import etcd_client_env
from .kwokctl import component_logs, run_kwokctl, snapshot_command

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

# What no lab makes and a snapshot must not bring in: each would have the grading cluster's API
# server call an address the snapshot chose.
CALLS_OUT: dict[str, Callable[[dict[str, Any]], bool]] = {
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": lambda item: True,
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": lambda item: True,
    "/apis/apiregistration.k8s.io/v1/apiservices": lambda item: bool((item.get("spec") or {}).get("service")),
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": lambda item: (
        ((item.get("spec") or {}).get("conversion") or {}).get("strategy") == "Webhook"
    ),
}


class SnapshotRefused(Exception):
    """The snapshot is not one etcd can restore: the bundle's fault, not the grader's."""


class RestoreNotReady(KwokClusterError):
    """The restored cluster did not become ready; ``logs`` holds kwokctl's words and the components' logs."""

    def __init__(self, message: str, logs: str) -> None:
        super().__init__(message)
        self.logs = logs


def cluster_for_kubeconfig(kubeconfig: Path) -> KwokCluster:
    """The kwokctl cluster whose kubeconfig this is: kwokctl keeps it in WORKDIR/clusters/NAME/."""
    cluster_dir = kubeconfig.resolve().parent
    if not (cluster_dir / "kwok.yaml").is_file() or cluster_dir.parent.name != "clusters":
        raise KwokClusterError(
            f"{kubeconfig} is not the kubeconfig of a lab cluster that gpulab or kwokctl started (no kwok.yaml "
            "beside it), so its etcd cannot be saved. Bundle the cluster `gpulab up LAB` started."
        )
    return KwokCluster(cluster_dir.name, workdir=cluster_dir.parent.parent)


def _kwokctl(cluster: KwokCluster, verb: str, path: Path, timeout: float) -> str:
    command = snapshot_command(cluster.bin_dir, cluster.name, verb, path)
    env = {**cluster.environment(), **etcd_client_env(cluster.cluster_dir)}  # etcd takes TLS clients only
    result = run_kwokctl(command, env, timeout)
    if result is None:
        raise KwokClusterError(f"kwokctl snapshot {verb} did not finish within {timeout:.0f}s")
    if result.returncode != 0:
        raise KwokClusterError(f"kwokctl snapshot {verb} failed: {(result.stdout + result.stderr).strip()[-2000:]}")
    return (result.stdout + result.stderr).strip()


def save(cluster: KwokCluster, path: Path, timeout: float = 120) -> None:
    """Write the cluster's etcd snapshot to ``path``."""
    _kwokctl(cluster, "save", path, timeout)
    if not path.is_file() or path.stat().st_size == 0:
        raise KwokClusterError(f"kwokctl snapshot save wrote nothing to {path}")


# A grading cluster's kwok renews its node leases about every second (kwokctl multiplies the duration by
# its heartbeat factor, 5), and retries a lease that is not yet free as often; a lab cluster's, every 50 s.
GRADING_OPTIONS: dict[str, object] = {"nodeLeaseDurationSeconds": 1}


@contextmanager
def grading_cluster(name: str = "gpulab-grade") -> Iterator[KwokCluster]:
    """A started fresh cluster, without the lab's nodes or objects (a restore brings the learner's), on ports
    of its own (``ports.py``: none of them free while it is restored); stopped at the end."""
    with KwokCluster(name, kwokctl_options=GRADING_OPTIONS) as cluster:
        yield cluster


RESTORE_ATTEMPTS = 2
IDENTITY = "/api/v1/namespaces/kube-system"  # every cluster has it; a restore brings the snapshot's


def restore(cluster: KwokCluster, path: Path, timeout: float = 120) -> None:
    """Replace a started cluster's state with the snapshot's, then wait until it is ready again.

    kwokctl only logs a component it could not stop, and an etcd that went on running keeps the
    fresh cluster's state: the restore took only if kube-system is the snapshot's; else it is tried again."""
    own = cluster.api.uid(IDENTITY)
    for _ in range(RESTORE_ATTEMPTS):
        restored_at = time.time()
        try:
            said = _kwokctl(cluster, "restore", path, timeout)
        except KwokClusterError as error:
            raise SnapshotRefused(f"the bundle's cluster snapshot cannot be restored: {error}") from None
        if wait_until(cluster.api.ready, cluster.ready_timeout, interval=0.05) and cluster.api.uid(IDENTITY) != own:
            break
    else:
        raise KwokClusterError(f"kwokctl restored the snapshot, but the cluster kept its own state: {said[-1500:]}")
    _release_node_leases(cluster, restored_at)
    if not wait_until(lambda: _ready_since(cluster, restored_at), cluster.ready_timeout, interval=0.1):
        raise RestoreNotReady(
            f"the restored cluster did not become ready within {cluster.ready_timeout:.0f}s "
            "(the API server answering and every node's lease renewed)",
            f"{said}\n{component_logs(cluster.cluster_dir)}",
        )


def _renewed(lease: dict[str, Any]) -> float:
    stamp = (lease.get("spec") or {}).get("renewTime")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else 0.0


def _ready_since(cluster: KwokCluster, moment: float) -> bool:
    api = cluster.api
    if not api.ready():
        return False
    nodes, leases = api.items("/api/v1/nodes"), api.items(LEASES)
    if nodes is None or leases is None:
        return False
    fresh = {lease["metadata"]["name"] for lease in leases if _renewed(lease) >= int(moment)}
    return {node["metadata"]["name"] for node in nodes} <= fresh


def _release_node_leases(cluster: KwokCluster, moment: float) -> None:
    for lease in cluster.api.items(LEASES) or []:
        if _renewed(lease) < int(moment):
            cluster.api.merge_patch(f"{LEASES}/{lease['metadata']['name']}", {"spec": {"holderIdentity": None}})


def calling_out(cluster: KwokCluster) -> list[str]:
    """The objects that would have the API server call out, as ``kind/name``; [] when there are none."""
    found = []
    for path, calls_out in CALLS_OUT.items():
        items = cluster.api.items(path)
        if items is None:
            raise KwokClusterError(f"the restored cluster did not answer {path}")
        kind = path.rsplit("/", 1)[1]
        found += [f"{kind}/{item['metadata']['name']}" for item in items if calls_out(item)]
    return found
