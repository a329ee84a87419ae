"""A lab cluster saved and restored whole: kwokctl's etcd snapshot.

The etcd format keeps every object as it was, status, ControllerRevisions and
custom resources included; kwokctl's k8s format re-creates a chosen list of kinds
and loses a DaemonSet's revisions, which gpuop's step 8 grades (``bench/README.md``
has the measurement). A bundle is graded on a cluster that starts on the snapshot:
etcdutl makes etcd's data directory from it, then etcd and the API server start on
that state, and nothing else: no controller, scheduler or kwok acts on the frozen
state. Usable without pytest.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .environ import SHORT_LIVED_GO
from .kwok import KwokCluster, KwokClusterError
from .kwokconfig import etcd_client_env
from .kwokctl import run_kwokctl, snapshot_command

DATA_DIR = "etcd"  # kwokctl's etcd data directory in the cluster's folder

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
# Nor does it call out: a webhook in a hostile snapshot is never called, not even by the API server's own writes
# as it starts, before :func:`calling_out` can read the cluster and refuse the bundle. Grading only reads, and
# its dry runs need no webhook: a lab has none.
NO_WEBHOOKS = {"kube-apiserver": {"disable-admission-plugins": "MutatingAdmissionWebhook,ValidatingAdmissionWebhook"}}
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

    def seed(cluster: KwokCluster) -> None:
        restore_data(cluster, path)

    # It lives seconds (its API server's start 0.6 s of CPU shorter; its peak some 420 MiB instead of 260 MiB).
    with KwokCluster(
        name, kwokctl_options=FROZEN, component_args=NO_WEBHOOKS, component_env=SHORT_LIVED_GO, seed=seed
    ) as cluster:
        yield cluster


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
