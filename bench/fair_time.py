"""How much longer an honest bundle's grading takes beside a starving neighbour than beside its honest twin.

    .venv/bin/python bench/fair_time.py [BATCHES]

The bundles are tests/test_fair_time.py's (gpurt's reference, its twin, and the starver whose crosscheck fills
the CPU); each round grades the honest bundle in a real ``gpulab grade-batch --jobs 2`` beside its twin, then
beside the starver, so the machine's drift is in both. Prints each batch's honest grading time and the median
of the pairwise ratios (starver / twin). The test holds the verdicts; this figure was its 1.25x bound.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_fair_time import batch, bundles, pair  # the test's bundles, not a copy of them


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batches", nargs="?", type=int, default=5)
    batches = parser.parse_args(argv).batches
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        made = bundles(base)
        seconds: dict[str, list[float]] = {"a-twin": [], "a-starver": []}
        for number in range(batches):
            for neighbour in seconds:
                graded = batch(pair(base, made, neighbour, f"{neighbour}-{number}"), base / f"{neighbour}-{number}.out")
                seconds[neighbour].append(graded["b-honest"]["outcome"]["seconds"]["grading"])
            print(f"batch {number + 1}: honest grading beside its twin {seconds['a-twin'][-1]:.1f} s, "
                  f"beside the starver {seconds['a-starver'][-1]:.1f} s", flush=True)  # fmt: skip
    pairs = [s / t for s, t in zip(seconds["a-starver"], seconds["a-twin"], strict=True)]
    print(f"median beside its twin {statistics.median(seconds['a-twin']):.1f} s, beside the starver "
          f"{statistics.median(seconds['a-starver']):.1f} s; starver/twin median of pairs {statistics.median(pairs):.2f}x "
          f"(min {min(pairs):.2f}, max {max(pairs):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
