"""The runs of one learner script a step's checks share, started ahead side by side:
``script_runner.runs_of(learner.file(SCRIPT)).ahead(Run(dump="v2-runc-only"), Run("ns", cluster=True))``.

Each run is a :class:`LearnerRun`: its result, what the fake containerd saw, and when it ran and which checks
read it (``started``, ``ended``, ``readers``), so that a profile of a grading can say where its time went
(``bench/grading_profile.py``). A check names itself as the reader by setting :data:`READING`. Usable without
pytest.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ...sandbox.containerd import FakeContainerd
from ...sandbox.script_result import ScriptResult
from ..learner import LearnerFile

T = TypeVar("T")
READING: ContextVar[str | None] = ContextVar("gpulab_reading_check", default=None)  # the check asking, if known


@dataclass(frozen=True)
class LearnerRun:
    """One run of a learner script, and what the fake containerd saw during it; ``started`` and ``ended`` are
    monotonic seconds, ``readers`` the checks that read it, each with how long it waited for it."""

    result: ScriptResult
    containerd: FakeContainerd
    user: int | None = None  # the uid it ran as, where the grader chose one (a root grader's sandbox)
    started: float = 0.0
    ended: float = 0.0
    label: str = ""  # its arguments and options, as a profile shows them
    readers: list[tuple[str, float]] = field(default_factory=list, compare=False)

    def asked_for_config_dump(self) -> bool:
        return self.containerd.asked_for_config_dump()


class Runner(Protocol):
    """What :class:`ScriptRuns` needs of a runner (:class:`~.script_runner.ScriptRunner` is one)."""

    work: Path  # a folder of the runner's own, for the files a planned run is given

    @property
    def pool(self) -> Executor: ...

    @property
    def run(self) -> Callable[..., LearnerRun]: ...  # (script, *args, **options)


class Run:
    """A run of a script to start ahead of the checks that read it: ``Run("arg", dump="v2-runc-only")``.

    Example:: script_runner.runs_of(learner.file(SCRIPT)).ahead(Run(dump="v2-runc-only"), Run("ns", cluster=True))
    """

    def __init__(self, *args: str, **options: Any) -> None:
        self.args, self.options = args, options

    @property
    def key(self) -> tuple[object, ...]:
        return (self.args, tuple(sorted(self.options.items())))


def label_of(args: tuple[str, ...], options: dict[str, Any]) -> str:
    """A run as a profile names it: its arguments, then the options that make it what it is."""
    shown = [repr(arg) if " " in arg else arg for arg in args] or ["(no argument)"]
    for name, value in sorted(options.items()):
        if value in (None, False, "") or name in ("fake", "scratch"):
            continue
        if name == "view":
            shown.append("view")
        elif name == "keeps":
            kept = {"kept state": value.state, "inputs in its folder": value.inputs, "writable": value.writable_inputs}
            shown += [words for words, given in kept.items() if given]
        elif name == "dump_text":
            shown.append("generated dump")
        else:
            shown.append(name if value is True else f"{name}={value}")
    return " ".join(shown)


class ScriptRuns:
    """The runs of one learner script, each distinct run made once: a step's checks share them. A run is started
    ahead (:meth:`ahead`, in the runner's pool) or made by the first check that asks (:meth:`run`); so is a
    :meth:`task`, a few runs one after another (the second run's pair)."""

    _folders = itertools.count(1)

    def __init__(self, runner: Runner, script: Path | LearnerFile) -> None:
        self.runner = runner
        self.script = script
        self._runs: dict[tuple[object, ...], Future[LearnerRun]] = {}
        self._made: dict[tuple[object, ...], object] = {}

    def ahead(self, *runs: Run) -> ScriptRuns:
        """Start ``runs`` side by side now (they do not depend on each other), those on an API server that fails
        first (they wait more than they work); a check then waits for its own."""
        for planned in sorted(runs, key=lambda run: not run.options.get("api")):
            if planned.key not in self._runs:
                self._runs[planned.key] = self.runner.pool.submit(
                    self.runner.run, self.script, *planned.args, **planned.options
                )
        return self

    def run(self, *args: str, **options: Any) -> LearnerRun:
        """As :meth:`ScriptRunner.run`; the same arguments and options give the same (first) run."""
        __tracebackhide__ = True
        return self._read(Run(*args, **options).key, lambda: self.runner.run(self.script, *args, **options))

    def task(
        self, key: tuple[object, ...], make: Callable[[], LearnerRun], *, ahead: bool = False
    ) -> LearnerRun | None:
        """The run ``make()`` returns, made once under ``key``: started in the pool with ``ahead`` (and None
        returned), else waited for (made now by the first asker)."""
        __tracebackhide__ = True
        if ahead:
            if key not in self._runs:
                self._runs[key] = self.runner.pool.submit(make)
            return None
        return self._read(key, make)

    def _read(self, key: tuple[object, ...], make: Callable[[], LearnerRun]) -> LearnerRun:
        __tracebackhide__ = True
        asked = time.monotonic()
        if key not in self._runs:
            done: Future[LearnerRun] = Future()
            try:
                done.set_result(make())
            except Exception as failure:  # a check failure (no such script) is every asker's
                done.set_exception(failure)
            self._runs[key] = done
        run = self._runs[key].result()
        run.readers.append((READING.get() or "?", time.monotonic() - asked))
        return run

    def made(self, key: tuple[object, ...], make: Callable[[], T]) -> T:
        """What ``make()`` returns, made once under ``key`` (the copies a planned run is given, say)."""
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]  # type: ignore[return-value]

    def folder(self, name: str) -> Path:
        """A new folder of the runner's own for these runs' files, named after ``name``."""
        folder = self.runner.work / f"planned-{next(self._folders)}-{name}"
        folder.mkdir(parents=True)
        return folder
