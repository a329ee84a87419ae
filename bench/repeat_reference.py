"""Flakes: start each lab's cluster, solve it with the reference, and grade it RUNS times in a row.

    .venv/bin/python bench/repeat_reference.py [RUNS] [LAB ...]

A disagreement is a grading whose outcome is not 100% passed, or that does not complete. Each lab also
counts its cluster starts that failed (one per lab here; `gpulab up` is the same start). Prints one line
per lab; the figures go in bench/README.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_gpulab.cluster.kwok import KwokCluster, KwokClusterError
from pytest_gpulab.labs import discover


def grade(lab: str, root: Path, cluster: KwokCluster, report: Path) -> str | None:
    """None when every step passed; else what differed."""
    subprocess.run(
        [sys.executable, "-m", "pytest", f"--lab={lab}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
         f"--gpulab-report={report}", "-p", "no:cacheprovider", "-q"],
        cwd=root.parent, stdin=subprocess.DEVNULL, capture_output=True, timeout=900,
    )  # fmt: skip
    data = json.loads(report.read_text())
    wrong = {s["number"]: s["message"] for s in data["steps"] if s["outcome"] != "passed"}
    return None if data["complete"] and not wrong else f"complete={data['complete']} {wrong}"


def repeat(lab: str, runs: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / "root"
        root.mkdir()
        try:
            cluster = KwokCluster.for_lab(lab, name=f"bench-{lab}").start()
        except KwokClusterError as error:
            print(f"{lab}: the cluster did not start: {error}")
            return
        try:
            solved = subprocess.run(
                ["bash", str(discover().get(lab).reference), str(root)], env=cluster.environment(),
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert solved.returncode == 0, solved.stderr[-2000:]
            started, disagreements = time.monotonic(), []
            for run in range(runs):
                if (differs := grade(lab, root, cluster, Path(work) / f"report-{run}.json")) is not None:
                    disagreements.append(f"run {run}: {differs}")
            took = (time.monotonic() - started) / runs
            print(f"{lab}: {len(disagreements)} disagreements in {runs} gradings ({took:.1f} s each)")
            for line in disagreements:
                print(f"  {line}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    for name in sys.argv[2:] or sorted(discover().labs):
        repeat(name, count)
