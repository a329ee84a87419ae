"""A lab cluster saved and restored whole: kwokctl's etcd snapshot.

The etcd format keeps every object as it was, status, ControllerRevisions and
custom resources included; kwokctl's k8s format re-creates a chosen list of kinds
and loses a DaemonSet's revisions, which gpuop's step 8 grades (``bench/README.md``
has the measurement). A bundle is graded on a cluster that starts on the snapshot:
etcdutl makes etcd's data directory from it, then etcd and the API server start on
that state, and nothing else: no controller, scheduler or kwok acts on the frozen
state. ``restore`` instead replaces a started cluster's state (what grading did
before, kept for the benchmarks): its node leases are handed to the new kwok.
Usable without pytest.
"""

from __future__ import annotations

import subprocess
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

DATA_DIR = "etcd"  # kwokctl's etcd data directory in the cluster's folder
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


# A frozen state is graded by etcd and the API server alone: no controller, scheduler or kwok acts on the
# learner's objects between the bundle and its grading (bench/README.md, "Which components grading needs").
FROZEN: dict[str, object] = {"disable": ["kube-controller-manager", "kube-scheduler", "kwok-controller"]}
ETCDUTL_TIMEOUT = 120.0


def restore_data(cluster: KwokCluster, path: Path) -> None:
    """etcd's data directory made from the snapshot (etcdutl checks its hash) before etcd starts on it."""
    cluster.cluster_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    command = [str(cluster.bin_dir / "etcdutl"), "snapshot", "restore", str(path)]
    command += ["--data-dir", str(cluster.cluster_dir / DATA_DIR)]
    try:
        result = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=ETCDUTL_TIMEOUT
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise KwokClusterError(f"etcdutl did not restore the snapshot within {ETCDUTL_TIMEOUT:.0f}s") from None
    if result.returncode != 0:
        said = (result.stdout + result.stderr).strip()[-1500:]
        raise SnapshotRefused(f"the bundle's cluster snapshot cannot be restored: {said}")


@contextmanager
def grading_cluster(path: Path, name: str = "gpulab-grade") -> Iterator[KwokCluster]:
    """A cluster started on the snapshot's state, on ports of its own (``ports.py``); stopped at the end."""
    with KwokCluster(name, kwokctl_options=FROZEN, seed=lambda cluster: restore_data(cluster, path)) as cluster:
        yield cluster


# What the restore into a started cluster (``restore``, kept for bench/snapshot_formats.py) gives its kwok: a
# renewal of the node leases about every second (kwokctl multiplies the duration by its heartbeat factor, 5).
GRADING_OPTIONS: dict[str, object] = {"nodeLeaseDurationSeconds": 1}


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
