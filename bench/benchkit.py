"""What the bench scripts share: a lab's solved cluster, timing whole processes side by side, medians."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs import discover

VENV_BIN = Path(sys.executable).parent


@contextlib.contextmanager
def solved_cluster(lab: str, work: Path, name: str) -> Iterator[tuple[KwokCluster, Path]]:
    """A fresh cluster of ``lab`` with the reference solution applied, and its lab root."""
    root = work / name / "root"
    root.mkdir(parents=True)
    with KwokCluster.for_lab(lab, name=name, workdir=work / name / "kwok") as cluster:
        solved = subprocess.run(
            ["bash", str(discover().get(lab).reference), str(root)], env=cluster.environment(),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if solved.returncode != 0:
            raise RuntimeError(f"the {lab} reference failed:\n{solved.stderr[-3000:]}")
        yield cluster, root


def grader(lab: str, root: Path, cluster: KwokCluster) -> list[str]:
    """``pytest --lab LAB`` as a learner runs it."""
    return [str(VENV_BIN / "pytest"), f"--lab={lab}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
            "-q", "-p", "no:cacheprovider"]  # fmt: skip


def run_once(command: Sequence[str], cluster: KwokCluster, cwd: Path) -> tuple[float, int, bytes]:
    """Wall seconds of the whole process, its exit status and its output."""
    began = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=cluster.environment(), stdin=subprocess.DEVNULL, capture_output=True, timeout=600
    )
    return time.perf_counter() - began, done.returncode, done.stdout


def side_by_side(commands: dict[str, tuple[Sequence[str], KwokCluster, Path]], runs: int) -> dict[str, list[float]]:
    """Each command ``runs`` times, in turn (A B C A B C ...) after one warm-up each; each must exit 0."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, (command, cluster, cwd) in commands.items():
            seconds, status, output = run_once(command, cluster, cwd)
            if status != 0:
                raise RuntimeError(f"{name} exited {status}: {' '.join(command)}\n{output.decode()[-3000:]}")
            if round_:
                times[name].append(seconds)
    return times


def figure(values: Sequence[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> str:
    """The median of the pairwise ratios: runs taken in turn, so drift cancels."""
    pairs = [a / b for a, b in zip(numerator, denominator, strict=True)]
    return f"{statistics.median(pairs):.2f}x (pairs min {min(pairs):.2f}, max {max(pairs):.2f})"
