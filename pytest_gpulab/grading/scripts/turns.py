"""Turns for one grading's script runs: side by side as a rule, and alone to tell a script that was starved
by the machine from one crowded by its own runs beside it.

A step starts its script's runs side by side, one per core. A script that loops until it times out then has
a share of the machine its other runs leave it, and the kernel reports it starved (waiting for a CPU, and
having little of one) as it would on a machine busy with other work. So a run that timed out starved is run
once more, alone, while no other run of the grading goes: a script that loops given a whole CPU times out
again, its own failure; one that is starved even then is :class:`MachineBusy`, and its bundle is graded again.
Usable without pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from ...sandbox.script_result import ScriptResult
from ..feedback import MachineBusy


class _Ran(Protocol):
    @property
    def result(self) -> ScriptResult: ...


R = TypeVar("R", bound=_Ran)


class Turns:
    """Runs go side by side; a run that must go alone waits for those going to end, and holds back new ones."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._beside = 0  # runs going side by side
        self._alone_asked = 0  # runs waiting to go alone, or going
        self._alone = False

    @contextmanager
    def beside(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: not self._alone_asked)  # each run it waits for is bounded by its timeout
            self._beside += 1
        try:
            yield
        finally:
            with self._changed:
                self._beside -= 1
                self._changed.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        with self._changed:
            self._alone_asked += 1
            self._changed.wait_for(lambda: not self._beside and not self._alone)
            self._alone = True
        try:
            yield
        finally:
            with self._changed:
                self._alone, self._alone_asked = False, self._alone_asked - 1
                self._changed.notify_all()

    def take(self, path: Path, once: Callable[[], R]) -> R:
        """``once()`` run beside the others; if it timed out starved, once more alone; starved even then, the
        machine's error (:class:`MachineBusy`), never the learner's."""
        __tracebackhide__ = True
        with self.beside():
            run = once()
        if run.result.starved:
            with self.alone():
                run = once()
        _not_starved(path, run.result)
        return run


def _not_starved(path: Path, result: ScriptResult) -> None:
    """A run that ran out of time because the machine gave it no CPU is the grading's error, not the learner's."""
    __tracebackhide__ = True
    if result.starved and result.cpu is not None:
        raise MachineBusy(
            f"{path.name} ran out of time while the grading machine was too busy to run it; this is not your "
            "mistake. Grade again; if it happens again, tell the course staff.",
            detail={
                "timeout": result.timeout,
                "seconds": round(result.duration, 3),
                "waited_for_cpu": round(result.cpu.waited, 3),
                "cpu_seconds": round(result.cpu.used, 3),
                "ran_alone": True,
            },
        )
