"""The grading's total budget (``--grading-budget``): past it, a check not yet graded is not run.

Each learner script's run is bounded by its timeout, and a script's runs after its first forced end are given at
once (``grading/scripts/runs.py``); this bounds the rest, a script that takes just under its timeout at every run.
Once the budget is spent, every check that has not started fails, naming the scripts that used the time, when
the learner's scripts used it; when the machine did (the grader's own threads waited for a CPU a quarter of the
time or more and had less than half of one: the starved-run rule of ``sandbox/cgroups.py``), each is an error
(:class:`MachineBusy`), and ``gpulab grade`` grades the bundle again.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .grading.feedback import MachineBusy, StepFailed
from .grading.scripts.script_runner import ScriptRunner
from .sandbox.cgroups import CpuTime, starved

runner_key = pytest.StashKey[ScriptRunner]()  # the grading's script runner, once a check asked for it


def _own_cpu() -> CpuTime:
    """What the grader's threads had of the CPU so far: seconds they waited for one, and seconds they ran."""
    waited = used = 0.0
    for task in Path("/proc/self/task").glob("*/schedstat"):
        try:
            ran, wait, _ = task.read_text().split()
        except (OSError, ValueError):  # a thread that just ended
            continue
        used, waited = used + int(ran) / 1e9, waited + int(wait) / 1e9
    return CpuTime(waited, used)


class GradingBudget:
    """A plugin bound to one grading: the clock starts with the session, and each check's setup is refused once
    ``seconds`` have passed."""

    def __init__(self, config: pytest.Config, seconds: float) -> None:
        self.config, self.seconds = config, seconds
        self.started = time.monotonic()
        self.cpu_at_start = _own_cpu()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started, self.cpu_at_start = time.monotonic(), _own_cpu()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        elapsed = time.monotonic() - self.started
        if elapsed > self.seconds:
            raise self.spent(elapsed)

    def spent(self, elapsed: float) -> StepFailed:
        """Why a check is not graded: the machine's error, or the learner's scripts'."""
        cpu, start = _own_cpu(), self.cpu_at_start
        own = CpuTime(cpu.waited - start.waited, cpu.used - start.used)
        scripts = self.scripts()
        detail = {"budget": self.seconds, "elapsed": round(elapsed, 1), "grader_cpu": round(own.used, 1),
                  "grader_waited_for_cpu": round(own.waited, 1), "scripts": scripts}  # fmt: skip
        if starved(own, elapsed):
            return MachineBusy(
                f"Not graded: the grading ran past its {self.seconds:g} s while the grading machine was too busy to "
                "run it; this is not your mistake. Grade again; if it happens again, tell the course staff.",
                detail=detail,
            )
        used = (
            f", most of it running {', '.join(f'{name} ({seconds:g} s)' for name, seconds in list(scripts.items())[:3])}"
            if scripts
            else ""
        )
        return StepFailed(
            f"Not graded: the grading ran past its {self.seconds:g} s{used}. Make each script end in a few seconds "
            "(a checker reads and prints a little), then grade again.",
            detail=detail,
        )

    def scripts(self) -> dict[str, float]:
        """The learner's scripts by the seconds their runs took, longest first."""
        runner = self.config.stash.get(runner_key, None)
        took: dict[str, float] = {}
        for run in list(runner.log) if runner is not None else []:
            name = Path(run.result.command[int(run.result.ran_with_bash)]).name
            took[name] = took.get(name, 0.0) + run.ended - run.started
        return {name: round(seconds, 1) for name, seconds in sorted(took.items(), key=lambda item: -item[1])}
