"""How soon `gpulab watch`'s row of a touched step updates after a change, on a solved gpunode cluster.

    .venv/bin/python bench/watch_latency.py [RUNS] [--cold]

The watch's core (pytest_gpulab.watch.core.Watcher) with a view that notes when each row is updated. Each run
starts from a quiet watch (every grading done): a write of out/ds-gap.txt (read by step 2 only; its content
alternately wrong and right), timed to step 2's row; then a `kubectl apply` of the learner's k8s/gfd-ds.yaml
with a new annotation (a DaemonSet: steps 1, 2, 4 and 8 read it, 3 is graded with 8, which needs it), timed to
the first touched row and to the last. Prints medians, minimums and maximums. ``--cold``: each grading a new
interpreter, not forked from the warm server.
"""

from __future__ import annotations

import queue
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from benchkit import figure, solved_cluster

from pytest_gpulab.labs import discover
from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.watch.core import Watcher
from pytest_gpulab.watch.grading import Grader
from pytest_gpulab.watch.reads import static_reads

WRONG = "DESIRED=3\nREADY=3\nSTATUS_LOOKS_HEALTHY=yes\nLABELED_NODES=3\nMISSING_NODE=lab-node-2\n"
BOUND = 120


class Recorder:
    """A view that notes when each step's row is updated."""

    def __init__(self) -> None:
        self.rows: queue.Queue[tuple[float, int]] = queue.Queue()

    def update(self, table: Any, event: str, detail: Any = None) -> None:
        if event == "step":
            self.rows.put((time.perf_counter(), int(detail)))


def rows_after(recorder: Recorder, began: float, wanted: set[int]) -> dict[int, float]:
    """Seconds from ``began`` to each wanted step's row update."""
    seen: dict[int, float] = {}
    while not wanted <= set(seen):
        at, step = recorder.rows.get(timeout=BOUND)
        if step in wanted and at >= began:
            seen.setdefault(step, at - began)
    return seen


def quiet(watcher: Watcher, recorder: Recorder) -> None:
    assert wait_until(lambda: watcher.idle, BOUND, interval=0.05), "the watch did not settle"
    while not recorder.rows.empty():
        recorder.rows.get_nowait()


def annotated(manifest: str, value: int) -> str:
    documents = [doc for doc in yaml.safe_load_all(manifest) if doc]
    for doc in documents:
        doc.setdefault("metadata", {}).setdefault("annotations", {})["bench.gpulab.example/run"] = str(value)
    return yaml.safe_dump_all(documents)


def bench(runs: int, warm: bool) -> None:
    lab = discover().get("gpunode")
    with tempfile.TemporaryDirectory() as work, solved_cluster("gpunode", Path(work), "watch") as (cluster, root):
        recorder = Recorder()
        watcher = Watcher(Grader("gpunode", root, str(cluster.kubeconfig), 47), static_reads(lab), recorder, warm=warm)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        try:
            files, first, last = [], [], []
            right = (root / "out/ds-gap.txt").read_text()
            gfd = (root / "k8s/gfd-ds.yaml").read_text()
            for run in range(runs):
                quiet(watcher, recorder)
                began = time.perf_counter()
                (root / "out/ds-gap.txt").write_text(WRONG if run % 2 == 0 else right)
                files.append(rows_after(recorder, began, {2})[2])
                quiet(watcher, recorder)
                began = time.perf_counter()
                cluster.kubectl("apply", "-f", "-", input=annotated(gfd, run))
                seen = rows_after(recorder, began, {1, 2, 4, 8})
                first.append(min(seen.values()))
                last.append(max(seen.values()))
                print(f"run {run + 1}: file {files[-1]:.2f} s; apply {first[-1]:.2f} to {last[-1]:.2f} s", flush=True)
            (root / "out/ds-gap.txt").write_text(right)
        finally:
            watcher.stop()
            thread.join()
    print(f"file write to step 2's row: {figure(files)}")
    print(f"kubectl apply to the first touched row: {figure(first)}")
    print(f"kubectl apply to the last touched row (1, 2, 4, 8): {figure(last)}")


if __name__ == "__main__":
    numbers = [int(arg) for arg in sys.argv[1:] if arg.isdigit()]
    bench(numbers[0] if numbers else 10, warm="--cold" not in sys.argv)
