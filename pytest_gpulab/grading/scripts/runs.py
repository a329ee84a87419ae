"""The runs of one learner script a step's checks share, started ahead side by side:
``script_runner.runs_of(learner.file(SCRIPT)).ahead(Run(dump="v2-runc-only"), Run("ns", cluster=True))``.

Each run is a :class:`LearnerRun`: its result, what the fake containerd saw, and when it ran and which checks
read it (``started``, ``ended``, ``readers``), so that a profile of a grading can say where its time went
(``bench/grading_profile.py``). A check names itself as the reader by setting :data:`READING`. Usable without
pytest.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ...sandbox.containerd import FakeContainerd
from ...sandbox.script_result import ScriptResult
from ..feedback import MachineBusy
from ..learner import LearnerFile
from .record import note_run, note_script

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
    given: dict[str, Any] = field(default_factory=dict, compare=False)  # its evidence entry (scripts/record.py)
    readers: list[tuple[str, float]] = field(default_factory=list, compare=False)

    def asked_for_config_dump(self) -> bool:
        return self.containerd.asked_for_config_dump()


Kind = tuple[Path, Hashable]  # a script, and the circumstances a run of it meets (an API server that fails so)


class ForcedEnds:
    """Each script's first run that was ended by force (its timeout, or a limit on its memory, processes or disk),
    by the script's path and the run's circumstances (``kind``: the same API server failing the same
    way, containerd there or not): every later run of that kind is that run again, at once, with the same cause in
    the same words (``result.repeated`` says so), as a TA would not wait out the same hang twenty times. A run of
    another kind is made: a checker that hangs only when the API server is unreachable is not failed for the rest.
    A run starved by the machine is never one (:mod:`.turns` raises :class:`MachineBusy` for it).

    A run of a kind whose run going now was seen only waiting (:meth:`waiting`) waits for that one to end first,
    its core given back meanwhile (``pause``): if it hangs, the later runs are its end again, rather than more of
    the same hang side by side; if it ends on its own, they are made as ever. ``bound`` bounds that wait."""

    def __init__(self, bound: float = 120.0) -> None:
        self.bound = bound
        self._waiting: dict[Kind, threading.Event] = {}  # a run of the kind seen only waiting: set when it ends
        self._first: dict[Kind, LearnerRun] = {}
        self._busy: dict[Path, MachineBusy] = {}  # a script the machine starved even alone: the grading is retried
        self._lock = threading.Lock()

    def get(self, kind: Kind) -> LearnerRun | None:
        """The kind's first forced end, given again; the machine's error again when it starved the script."""
        __tracebackhide__ = True
        with self._lock:
            first, busy = self._first.get(kind), self._busy.get(kind[0])
        if busy is not None:
            raise MachineBusy(busy.message, detail=busy.detail)
        return replace(first, result=replace(first.result, repeated=True)) if first is not None else None

    def run(self, kind: Kind, take: Callable[[Path, Callable[[], LearnerRun]], LearnerRun], path: Path,
            once: Callable[[], LearnerRun], pause: Callable[[], AbstractContextManager[object]] = nullcontext,
            ) -> LearnerRun:  # fmt: skip
        """The kind's first forced end again, or ``take(path, once)`` (kept as that end when it is one)."""
        __tracebackhide__ = True
        with self._lock:
            going = self._waiting.get(kind)
        if going is not None and not going.is_set():
            with pause():
                going.wait(self.bound)
        return self.get(kind) or self.first(kind, self._taken(kind, take, path, once))

    def waiting(self, kind: Kind, ended: threading.Event) -> None:
        """A run of ``kind`` is seen only waiting; ``ended`` is set when it ends."""
        with self._lock:
            if kind not in self._waiting or self._waiting[kind].is_set():
                self._waiting[kind] = ended

    def _taken(self, kind: Kind, take: Callable[[Path, Callable[[], LearnerRun]], LearnerRun], path: Path,
               once: Callable[[], LearnerRun]) -> LearnerRun:  # fmt: skip
        """``take(path, once)``; its :class:`MachineBusy` kept, so that the script's later runs raise it at once
        (the grading is an error, graded again, whatever they would find). A run starved beside others that waits
        to go alone is not run again once another run of its kind has ended by force meanwhile."""
        __tracebackhide__ = True
        try:
            return take(path, lambda: self.get(kind) or once())
        except MachineBusy as busy:
            with self._lock:
                self._busy.setdefault(kind[0], busy)
            raise

    def first(self, kind: Kind, run: LearnerRun) -> LearnerRun:
        """``run``, kept as its kind's first forced end when it is one and there is none yet. An output flood is not
        one: it ends at its limit in a moment, and a check may read more of a run than its output (the commands it
        ran), which only a run of its own shows, the same live and from a bundle."""
        if run.result.forced and not run.result.flooded:
            with self._lock:
                self._first.setdefault(kind, run)
        return run


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
        self._held: list[Run] = []  # runs asked for ahead while a plan is being made (:func:`holding`)
        self._kept: dict[tuple[object, ...], Any] = {}  # a run to make with a kept state (Keeps), by its key
        self._pending: list[tuple[tuple[object, ...], Run | None, Callable[[], LearnerRun]]] = []  # after held ones

    def ahead(self, *runs: Run) -> ScriptRuns:
        """Start ``runs`` side by side now (they do not depend on each other), those on an API server that fails
        first (they wait more than they work); a check then waits for its own. While a plan is being made
        (:func:`holding`) they start with it."""
        held = _HOLDING.get()
        if held is None:
            self._start(runs)
        else:
            self._held += runs
            held.append(self)
        return self

    def _start(self, runs: Sequence[Run]) -> None:
        for planned in sorted(runs, key=lambda run: not run.options.get("api")):
            if planned.key not in self._runs:
                kept = {"keeps": self._kept[planned.key]} if planned.key in self._kept else {}
                self._runs[planned.key] = self.runner.pool.submit(
                    self.runner.run, self.script, *planned.args, **planned.options, **kept
                )

    def release(self) -> None:
        """Start the runs held while the plan was made, then those planned to follow them."""
        held, self._held = self._held, []
        self._start(held)
        pending, self._pending = self._pending, []
        for key, first, make in pending:
            self.after(key, first, make)

    def keep_state(self, planned: Run, keeps: Any) -> bool:
        """Make ``planned``, when it is started, with ``keeps`` (a kept state, which another run then finds), so that
        one run serves both; False when it is started already, and can no longer."""
        if planned.key in self._runs:
            return False
        self._kept[planned.key] = keeps
        return True

    def after(self, key: tuple[object, ...], first: Run | None, make: Callable[[], LearnerRun]) -> None:
        """``make()``, under ``key``, started in the pool as soon as the run ``first`` (asked for ahead) has ended,
        or at once without one; not at all when ``first`` is not asked for ahead."""
        if key in self._runs:
            return
        if first is not None and first.key not in self._runs:
            if any(held.key == first.key for held in self._held):
                self._pending.append((key, first, make))
            return
        done: Future[LearnerRun] = Future()
        self._runs[key] = done

        def begin(ended: Future[LearnerRun] | None) -> None:
            if ended is not None and (failure := ended.exception()) is not None:
                done.set_exception(failure)
                return
            try:
                self.runner.pool.submit(make).add_done_callback(lambda made: _settle(done, made))
            except RuntimeError as closed:  # the runner closed: the grading is over
                done.set_exception(closed)

        if first is None:
            begin(None)
        else:
            self._runs[first.key].add_done_callback(begin)

    def run(self, *args: str, **options: Any) -> LearnerRun:
        """As :meth:`ScriptRunner.run`; the same arguments and options give the same (first) run."""
        __tracebackhide__ = True
        return self._read(Run(*args, **options).key, lambda: self.runner.run(self.script, *args, **options))

    def task(self, key: tuple[object, ...], make: Callable[[], LearnerRun]) -> LearnerRun:
        """The run ``make()`` returns, made once under ``key`` (planned ahead with :meth:`after`, or made now)."""
        __tracebackhide__ = True
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
        note_script(self.script)  # a script that is not there is what the check found
        run = self._runs[key].result()
        note_run(run)
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


def _settle(done: Future[LearnerRun], made: Future[LearnerRun]) -> None:
    if (failure := made.exception()) is not None:
        done.set_exception(failure)
    else:
        done.set_result(made.result())


_HOLDING: ContextVar[list[ScriptRuns] | None] = ContextVar("gpulab_holding_runs", default=None)


def release_held() -> None:
    """Start the runs held so far, and hold no more: called before a long wait (a cluster's copy), so that they run
    meanwhile rather than after it."""
    held = _HOLDING.get()
    if held is not None:
        _HOLDING.set(None)
        for runs in dict.fromkeys(held):
            runs.release()


@contextmanager
def holding() -> Iterator[None]:
    """Runs asked for ahead inside are held, and started when it ends: a plan made meanwhile may still choose how
    some are made (:meth:`ScriptRuns.keep_state`)."""
    held: list[ScriptRuns] = []
    token = _HOLDING.set(held)
    try:
        yield
    finally:
        _HOLDING.reset(token)
        for runs in dict.fromkeys(held):
            runs.release()
