"""Bundles graded per minute by ``gpulab grade-batch`` against ``--jobs``, and where each bundle's time goes.

    .venv/bin/python bench/batch_throughput.py [BUNDLES] [JOBS ...]

BUNDLES gpuop bundles (default 8: the reference and traps of gpuop, one solved cluster) are
written once; then, for each JOBS (default 1 2 4), the whole batch is graded into a fresh results
folder by the ``gpulab grade-batch`` command, as an instructor runs it. Each outcome.json's
``seconds`` says where a bundle's time went: the fresh cluster's start, the restore of the
snapshot (ready again, node leases taken), and the grading (``pytest --lab``, process included).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benchkit import VENV_BIN, solved_cluster

from pytest_gpulab.cohort.bundle import write_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.selftest.variants import TRAP, copy_root, load_variants

CHECKOUT = Path(__file__).resolve().parent.parent

PHASES = ("cluster_start", "grading", "total")


def make_bundles(work: Path, count: int) -> Path:
    bundles = work / "bundles"
    bundles.mkdir()
    lab = discover().get("gpuop")
    with solved_cluster("gpuop", work, "bench-batch-source") as (cluster, root):
        write_bundle(lab, root, cluster, bundles / "00-reference.gpulab.tar.gz")
        traps = [v for v in load_variants(CHECKOUT / "graders" / "gpuop") if v.kind == TRAP and not v.own_cluster]
        for index, variant in enumerate(traps[: count - 1], start=1):
            variant_root = copy_root(root, work / "roots" / variant.name)
            variant.apply_edits(variant_root)
            write_bundle(lab, variant_root, cluster, bundles / f"{index:02d}-{variant.name}.gpulab.tar.gz")
    return bundles


def grade(bundles: Path, out: Path, jobs: int) -> float:
    began = time.perf_counter()
    done = subprocess.run(
        [str(VENV_BIN / "gpulab"), "grade-batch", str(bundles), "--jobs", str(jobs), "--out", str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return time.perf_counter() - began


def phases(out: Path) -> dict[str, float]:
    outcomes = [json.loads(path.read_text()) for path in out.glob("*/outcome.json")]
    assert all(o["status"] == "graded" for o in outcomes), [o for o in outcomes if o["status"] != "graded"]
    return {phase: statistics.median(o["seconds"][phase] for o in outcomes) for phase in PHASES}


def main(count: int, job_counts: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-batch-") as scratch:
        work = Path(scratch)
        bundles = make_bundles(work, count)
        print(f"{count} gpuop bundles; medians per bundle in seconds")
        print("| jobs | wall s | bundles/min | speed-up | " + " | ".join(PHASES) + " |")
        print("| --- | --- | --- | --- | " + " | ".join("---" for _ in PHASES) + " |")
        first = None
        for jobs in job_counts:
            wall = grade(bundles, work / f"results-{jobs}", jobs)
            first = first or wall
            each = phases(work / f"results-{jobs}")
            cells = " | ".join(f"{each[phase]:.2f}" for phase in PHASES)
            print(f"| {jobs} | {wall:.1f} | {60 * count / wall:.1f} | {first / wall:.2f}x | {cells} |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, [int(a) for a in sys.argv[2:]] or [1, 2, 4])
