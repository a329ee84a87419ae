"""Where one grading's time goes: every learner-script run, the grading's critical path, and the idle machine.

    .venv/bin/python bench/grading_profile.py [--runs N] LAB

Grades the lab's reference, solved on a fresh cluster, with the real plugin in this process (N times; the last
is printed, after a warm-up). For every learner-script run it prints:

- its purpose: the checks that read it (the step's own checks and the contract's ``contract-*``);
- when it started (seconds since the grading began), its wall time, the CPU its processes used and how long
  they waited for a CPU (the run's control group), and its kubectl starts (processes named kubectl below its
  first process, sampled from /proc every 2 ms: a kubectl of under 2 ms may be missed).

Then the critical path: the checks go one after another, so the grading's wall is the sum of theirs; for each
check that waited on a run, the run it waited for and for how long, and whether that run was still queued
(started after the check asked) or running. Last, how much of the machine's CPU was idle during the grading
(/proc/stat), which is what overlapping runs can still use.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from benchkit import solved_cluster

from pytest_gpulab.grading.scripts.runs import READING, LearnerRun
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner


class KubectlStarts:
    """Processes named kubectl, each with its ancestors' pids (a run's first process is one), sampled from /proc."""

    def __init__(self) -> None:
        self.seen: dict[int, set[int]] = {}  # pid -> its ancestors
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> KubectlStarts:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.002):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) in self.seen:
                    continue
                try:
                    if Path(entry.path, "comm").read_text().strip() == "kubectl":
                        self.seen[int(entry.name)] = ancestors(int(entry.name))
                except OSError:
                    continue

    def count(self, pid: int | None) -> int:
        return sum(1 for above in self.seen.values() if pid in above) if pid else 0


def ancestors(pid: int) -> set[int]:
    found: set[int] = set()
    while pid > 1 and len(found) < 12:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
        found.add(pid)
    return found


@dataclass
class Recorder:
    """A pytest plugin: each check's start and end, the check that asks for a run, and the grading's runs."""

    checks: list[tuple[str, float, float]] = field(default_factory=list)
    runner: ScriptRunner | None = None

    @pytest.fixture(scope="session", autouse=True)
    def _runner(self, script_runner: ScriptRunner) -> ScriptRunner:
        self.runner = script_runner
        return script_runner

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        name, started = item.nodeid.split("/", 1)[-1], time.monotonic()
        token = READING.set(name)
        try:
            return (yield)
        finally:
            READING.reset(token)
            self.checks.append((name, started, time.monotonic()))


def cpu_jiffies() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


@dataclass
class Profile:
    recorder: Recorder
    runs: list[LearnerRun]
    began: float
    wall: float
    kubectl: KubectlStarts
    idle: float  # the machine's idle share of its CPU during the grading


def grade(lab: str, root: Path, kubeconfig: Path) -> Profile:
    recorder = Recorder()
    idle0, total0 = cpu_jiffies()
    began = time.monotonic()
    args = [f"--lab={lab}", f"--lab-root={root}", f"--kubeconfig={kubeconfig}", "-q", "-p", "no:cacheprovider"]
    with KubectlStarts() as kubectl:
        status = pytest.main(args, plugins=[recorder])
    wall = time.monotonic() - began
    idle1, total1 = cpu_jiffies()
    if status != 0:
        raise SystemExit(f"the grading of {lab}'s reference exited {status}")
    runs = list(recorder.runner.log) if recorder.runner is not None else []
    return Profile(recorder, runs, began, wall, kubectl, (idle1 - idle0) / max(1, total1 - total0))


def print_runs(runs: list[LearnerRun], began: float, kubectl: KubectlStarts) -> None:
    print(f"{'start':>6} {'wall':>6} {'cpu':>6} {'waited':>6} {'kubectl':>7}  run / read by")
    for run in sorted(runs, key=lambda r: r.started):
        cpu = run.result.cpu
        used, waited = (f"{cpu.used:6.2f}", f"{cpu.waited:6.2f}") if cpu else ("     -", "     -")
        readers = ", ".join(sorted({name.split("::")[-1] for name, _ in run.readers})) or "(no check read it)"
        print(f"{run.started - began:6.2f} {run.ended - run.started:6.2f} {used} {waited} "
              f"{kubectl.count(run.result.pid):7d}  {run.label}\n{'':36}{readers}")  # fmt: skip


def print_critical_path(recorder: Recorder, runs: list[LearnerRun], began: float, wall: float, idle: float) -> None:
    checks = sum(end - start for _, start, end in recorder.checks)
    waits = [(name, seconds, run) for run in runs for name, seconds in run.readers if seconds >= 0.02]
    print(f"\ncritical path: {wall:.2f} s of wall; the checks, one after another, {checks:.2f} s; before and after "
          f"them (start-up, collection, the report) {wall - checks:.2f} s")  # fmt: skip
    by_step: dict[str, list[tuple[str, float, LearnerRun]]] = {}
    for name, seconds, run in waits:
        by_step.setdefault(name.split("::")[0], []).append((name, seconds, run))
    steps = dict.fromkeys(name.split("::")[0] for name, _, _ in recorder.checks)  # in the order they ran
    for step in (step for step in steps if step in by_step):
        spent = sum(end - start for name, start, end in recorder.checks if name.split("::")[0] == step)
        waited = sum(seconds for _, seconds, _ in by_step[step])
        print(f"  {step}: {spent:.2f} s, of which {waited:.2f} s waiting for runs:")
        for check, seconds, run in sorted(by_step[step], key=lambda wait: -wait[1]):
            print(f"    {check.split('::')[-1]} waited {seconds:.2f} s for [{run.label}] "
                  f"(started {run.started - began:.2f} s, ran {run.ended - run.started:.2f} s)")  # fmt: skip
    print(f"\nthe machine's CPU idle during the grading: {idle:.0%} of {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lab")
    parser.add_argument("--runs", type=int, default=2, help="gradings in all; the last is printed (default 2)")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch, solved_cluster(options.lab, Path(scratch), "profile") as solved:
        cluster, root = solved
        for _ in range(options.runs):
            last = grade(options.lab, root, cluster.kubeconfig)
        starts = sum(last.kubectl.count(run.result.pid) for run in last.runs)
        print(
            f"{options.lab}: {len(last.runs)} learner-script runs, {starts} kubectl starts, grading {last.wall:.2f} s"
        )
        print_runs(last.runs, last.began, last.kubectl)
        print_critical_path(last.recorder, last.runs, last.began, last.wall, last.idle)


if __name__ == "__main__":
    main()
