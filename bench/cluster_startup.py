"""Time from nothing to a Ready lab cluster, binaries cached, for each lab.

    .venv/bin/python bench/cluster_startup.py [RUNS] [LAB ...]

Each run: KwokCluster.for_lab(LAB).start() (kwokctl create, the lab's nodes created, Ready and rid
of the not-ready taint, the default ServiceAccount present, the lab's starting objects applied),
then stop(). The labs take turns, run by run.
"""

from __future__ import annotations

import statistics
import sys
import time

from benchkit import figure

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs import discover


def main(runs: int, labs: list[str]) -> None:
    starts: dict[str, list[float]] = {lab: [] for lab in labs}
    stops: list[float] = []
    for index in range(runs):
        for lab in labs:
            cluster = KwokCluster.for_lab(lab, name=f"bench-{lab}-{index}")
            began = time.monotonic()
            cluster.start()
            ready = time.monotonic()
            cluster.stop()
            starts[lab].append(ready - began)
            stops.append(time.monotonic() - ready)
    for lab, seconds in starts.items():
        print(f"{lab}: start to Ready {figure(seconds)} s over {runs} runs")
    print(f"stop: median {statistics.median(stops):.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2:] or sorted(discover().names))
