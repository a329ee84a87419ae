"""kwokctl's two snapshot formats on gpuop's solved cluster: size, save and restore time, and the grading.

    .venv/bin/python bench/snapshot_formats.py [RUNS]

For each format (etcd, k8s) and run: ``kwokctl snapshot save`` of the solved cluster; then, to
ready (the API server's /readyz): for etcd, a grading cluster started on the snapshot
(``snapshot.grading_cluster``, as ``gpulab grade`` does); for k8s, a fresh cluster without the lab's
nodes and ``kwokctl snapshot restore`` into it; then
``pytest --lab gpuop`` on the reference's root against the restored cluster, whose step outcomes
are printed: a format that loses what a step grades shows as that step failing.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchkit import VENV_BIN, solved_cluster

from pytest_gpulab.cluster import snapshot
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cluster.kwokconfig import etcd_client_env
from pytest_gpulab.cluster.kwokctl import snapshot_command
from pytest_gpulab.labs.waiting import wait_until


def kwokctl(cluster: KwokCluster, verb: str, path: Path, fmt: str) -> float:
    command = snapshot_command(cluster.bin_dir, cluster.name, verb, path)
    command[command.index("--format") + 1] = fmt
    began = time.perf_counter()
    env = {**cluster.environment(), **etcd_client_env(cluster.cluster_dir)}  # etcd takes TLS clients only
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - began


@contextmanager
def restored(path: Path, fmt: str, name: str, seconds: list[float]) -> Iterator[KwokCluster]:
    """A cluster holding the snapshot's state, ready; the seconds it took appended to ``seconds``."""
    began = time.perf_counter()
    if fmt == "etcd":
        with snapshot.grading_cluster(path, name) as cluster:
            seconds.append(time.perf_counter() - began)
            yield cluster
        return
    with KwokCluster(name) as cluster:
        began = time.perf_counter()
        kwokctl(cluster, "restore", path, fmt)
        wait_until(cluster.api.ready, 60, interval=0.05)
        seconds.append(time.perf_counter() - began)
        yield cluster


def graded(root: Path, cluster: KwokCluster, work: Path) -> str:
    report = work / "report.json"
    subprocess.run(
        [str(VENV_BIN / "pytest"), "--lab=gpuop", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
         f"--gpulab-report={report}", "-q", "-p", "no:cacheprovider"],
        cwd=work, env=cluster.environment(), capture_output=True, timeout=600,
    )  # fmt: skip
    steps = json.loads(report.read_text())["steps"]
    return " ".join(f"{s['number']}:{'ok' if s['outcome'] == 'passed' else s['outcome']}" for s in steps)


def main(runs: int) -> None:
    figures: dict[str, dict[str, list[float]]] = {f: {"bytes": [], "save": [], "restore": []} for f in ("etcd", "k8s")}
    verdicts: dict[str, set[str]] = {"etcd": set(), "k8s": set()}
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-formats-") as scratch:
        work = Path(scratch)
        with solved_cluster("gpuop", work, "bench-formats-source") as (source, root):
            for index in range(runs):
                for fmt in ("etcd", "k8s"):
                    path = work / f"snapshot-{index}.{fmt}"
                    figures[fmt]["save"].append(kwokctl(source, "save", path, fmt))
                    figures[fmt]["bytes"].append(path.stat().st_size)
                    with restored(path, fmt, f"bench-restore-{fmt}-{index}", figures[fmt]["restore"]) as cluster:
                        verdicts[fmt].add(graded(root, cluster, work))
    for fmt, numbers in figures.items():
        print(
            f"{fmt}: {statistics.median(numbers['bytes']) / 1024:.0f} KiB, save {statistics.median(numbers['save']):.2f} s, "
            f"restore to ready {statistics.median(numbers['restore']):.2f} s (medians of {runs}); "
            f"grading of the restored cluster: {' / '.join(sorted(verdicts[fmt]))}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
