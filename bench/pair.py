"""Two commands timed as whole processes, in turn (A B A B ...), after a warm-up each: medians and the
pairwise ratio A/B, so a comparison holds while the machine's speed drifts. Each run must exit 0.

Besides wall time, two CPU figures: the process tree's (what it waited for) and the whole machine's busy
core-seconds during the run (/proc/stat), which also counts what the command started detached (a lab
cluster's components) or does not wait for; that one holds only with nothing else running.

    .venv/bin/python bench/pair.py [-n RUNS] 'COMMAND A' 'COMMAND B'

Each command is one string split as a shell splits words, and is given no shell.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import time


def machine_busy() -> float:
    """Core-seconds the machine has been busy since boot (all but idle and iowait)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run_once(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds of the whole process (its waited-for children included), and the machine's
    busy core-seconds meanwhile."""
    before, busy = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy()
    began = time.perf_counter()
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=3600)
    wall = time.perf_counter() - began
    after, busy = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy() - busy
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} exited {done.returncode}:\n{done.stdout.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=5)
    parser.add_argument("a")
    parser.add_argument("b")
    options = parser.parse_args()
    commands = {"A": shlex.split(options.a), "B": shlex.split(options.b)}
    times: dict[str, list[tuple[float, float, float]]] = {"A": [], "B": []}
    for round_ in range(options.runs + 1):
        for name, command in commands.items():
            figures = run_once(command)
            if round_:
                times[name].append(figures)
    for name in commands:
        walls = [wall for wall, _, _ in times[name]]
        cpu = statistics.median(cpu for _, cpu, _ in times[name])
        busy = statistics.median(busy for _, _, busy in times[name])
        print(f"{name}: wall median {statistics.median(walls):.3f} s (min {min(walls):.3f}, max {max(walls):.3f}); "
              f"CPU of the process tree {cpu:.3f} s; machine busy {busy:.2f} core-s")  # fmt: skip
    pairs = [a[0] / b[0] for a, b in zip(times["A"], times["B"], strict=True)]
    print(f"A/B wall: median {statistics.median(pairs):.3f} (min {min(pairs):.3f}, max {max(pairs):.3f})")


if __name__ == "__main__":
    main()
