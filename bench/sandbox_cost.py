"""What the sandbox costs per learner-script run: the same script, sandboxed and not, interleaved.

    .venv/bin/python bench/sandbox_cost.py [RUNS]

Prints the median and spread of each, and the median of the pairwise ratios (sandboxed / plain).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox import confine as sandbox

SCRIPT = "#!/bin/sh\ncontainerd config dump >/dev/null\necho OK\n"


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        lab = Path(work) / "lab"
        (lab / "bin").mkdir(parents=True)
        script = lab / "bin" / "check.sh"
        script.write_text(SCRIPT)
        script.chmod(0o755)
        runners = {
            "sandboxed": ScriptRunner(Path(work) / "a", 20, lambda: None, lab_root=lab, sandbox=sandbox.probe()),
            "plain": ScriptRunner(Path(work) / "b", 20, lambda: None, lab_root=lab),
        }
        times: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(runs + 1):  # the first pair warms up
            for name, runner in runners.items():
                started = time.perf_counter()
                result = runner.run(script, dump="v2-runc-nvidia").result
                times[name].append(time.perf_counter() - started)
                assert result.stdout == "OK\n", result
        print(sandbox.probe().describe())
        for name, seconds in times.items():
            kept = seconds[1:]
            print(
                f"{name:>9}: median {statistics.median(kept) * 1000:.1f} ms (min {min(kept) * 1000:.1f}, max {max(kept) * 1000:.1f})"
            )
        ratios = [a / b for a, b in zip(times["sandboxed"][1:], times["plain"][1:], strict=True)]
        print(f"ratio sandboxed/plain: median {statistics.median(ratios):.2f} over {runs} pairs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
