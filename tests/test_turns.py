"""A grading's script runs go side by side; one that timed out starved goes once more alone, so a script crowded
by its own runs beside it is judged on a CPU of its own, and only one starved even alone is the machine's error."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_gpulab.grading.feedback import MachineBusy
from pytest_gpulab.grading.scripts.turns import Turns
from pytest_gpulab.sandbox.cgroups import CpuTime
from pytest_gpulab.sandbox.script_result import ScriptResult

CHECK = Path("/lab/bin/check.sh")


def timed_out(waited: float, used: float) -> ScriptResult:
    return ScriptResult(["check.sh"], None, "", "", True, False, True, 4.0, timeout=4.0, cpu=CpuTime(waited, used))


STARVED, FED = timed_out(3.0, 0.3), timed_out(0.1, 3.9)


@dataclass
class Ran:
    result: ScriptResult


class Attempts:
    """Attempts that answer from ``results`` in turn, and count how many went at once."""

    def __init__(self, *results: ScriptResult) -> None:
        self.results, self.going, self.most, self.lock = list(results), 0, 0, threading.Lock()
        self.alone_with: list[int] = []

    def __call__(self) -> Ran:
        with self.lock:
            self.going += 1
            self.most = max(self.most, self.going)
            result = self.results.pop(0) if self.results else FED
        time.sleep(0.05)  # the length of a run, during which the others are counted
        with self.lock:
            if result is FED:
                self.alone_with.append(self.going)
            self.going -= 1
        return Ran(result)


def test_a_run_that_timed_out_starved_goes_again_alone_and_its_timeout_is_its_own():
    """Crowded by its own runs beside it, it had little CPU; alone, it had one and still timed out."""
    turns, attempts = Turns(), Attempts(STARVED, STARVED, STARVED, STARVED)
    with ThreadPoolExecutor(4) as pool:
        ran = list(pool.map(lambda _: turns.take(CHECK, attempts), range(4)))
    assert [run.result for run in ran] == [FED] * 4
    assert attempts.most == 4  # first side by side,
    assert attempts.alone_with == [1, 1, 1, 1]  # then each again, with nothing beside it


def test_a_run_starved_even_alone_is_the_machine_s_error_never_the_learner_s():
    with pytest.raises(MachineBusy, match=r"check.sh ran out of time while the grading machine was too busy") as busy:
        Turns().take(CHECK, Attempts(STARVED, STARVED))
    assert busy.value.detail["ran_alone"] is True
    assert busy.value.detail["cpu_seconds"] == 0.3


def test_a_run_that_had_its_cpu_goes_once():
    attempts = Attempts(FED, STARVED)
    assert Turns().take(CHECK, attempts).result is FED
    assert attempts.results == [STARVED]  # never asked again
