"""Time from nothing to a Ready lab cluster, binaries cached.

    .venv/bin/python bench/cluster_startup.py [RUNS]

Each run: KwokCluster.for_lab("gpuop").start() (kwokctl create, three nodes
created, all Ready, default ServiceAccount present), then stop().
"""

import statistics
import sys
import time

from pytest_gpulab.kwok import KwokCluster


def main(runs: int) -> None:
    starts, stops = [], []
    for index in range(runs):
        cluster = KwokCluster.for_lab("gpuop", name=f"bench-{index}")
        began = time.monotonic()
        cluster.start()
        ready = time.monotonic()
        cluster.stop()
        starts.append(ready - began)
        stops.append(time.monotonic() - ready)
    print(f"runs: {runs}")
    print(f"start to Ready (s): min {min(starts):.2f}  median {statistics.median(starts):.2f}  max {max(starts):.2f}")
    print(f"stop (s): median {statistics.median(stops):.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
