"""The watch: grade once, then again after every change, the touched steps first; never two gradings at once.

Changes come from the watches' threads into a list; the watch's own thread takes them, marks every step owed
a grading, and grades: first the steps the changes touch (with the steps they need, so a blocked step's
sentence says what became of them), then the rest owed. A change that comes during a grading is taken after
it, and its touched steps go first again. Rows are updated as each step's last check ends. ``stop`` ends the
grading under way (SIGINT, as Ctrl-C) and every watch. Usable without a terminal: a view is told of each update.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..cohort.warm import WarmGradings
from .changes import Change
from .files import TreeWatch
from .grading import Grader, Grading, Outcome, read_report
from .kube import ClusterWatch
from .reads import Reads, lab_kinds, reads_of, touched
from .table import GRADING, QUEUED, Table

SETTLE_SECONDS = 0.05  # a burst of events (an editor's save, an apply's objects) is taken as one change


class View(Protocol):
    def update(self, table: Table, event: str, detail: Any = None) -> None: ...


class Watcher:
    def __init__(self, grader: Grader, static: dict[int, Reads | None], view: View, *, warm: bool = True) -> None:
        """``warm``: gradings are forked from a server that imported pytest, the plugin and the client once
        (cohort/warm.py), not started cold: the same runs, a third of a second sooner each."""
        self.grader = grader
        self.static = static
        self.view = view
        self.table = Table(grader.lab, grader.seed, notes=[])
        self.gradings = 0
        self._changes: list[Change] = []
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._owed: set[int] = set()
        self._first: set[int] = set()
        self._reads: dict[int, Reads | None] = dict(static)
        self._needs: dict[int, set[int]] = {}
        self._scratch = tempfile.TemporaryDirectory(prefix="gpulab-watch-")
        self.files = TreeWatch(grader.lab_root, self.report)
        self.cluster: ClusterWatch | None = None
        self.warm = WarmGradings(own_session=True) if warm else None

    @property
    def idle(self) -> bool:
        """No grading owed, under way or asked for by a change not yet taken."""
        with self._lock:
            return not self._owed and not self._changes and not self._changed.is_set()

    # -- changes, from the watches' threads --------------------------------------------

    def report(self, change: Change) -> None:
        with self._lock:
            self._changes.append(change)
        self._changed.set()

    def _take(self) -> list[Change]:
        self._changed.clear()
        with self._lock:
            taken, self._changes = self._changes, []
        return taken

    # -- the watch's thread ---------------------------------------------------------

    def run(self) -> None:
        """Watch until ``stop``; everything it started is ended when it returns."""
        try:
            if self.warm is not None:
                self.warm.__enter__()
            self._start_watches()
            self._owed = set(self.static) or {0}
            while not self._stopping.is_set():
                if self._owed:
                    self._grade_next()
                elif self._changed.wait(0.25):
                    self._stopping.wait(SETTLE_SECONDS)
                    self._note(self._take())
        finally:
            self._end()

    def _start_watches(self) -> None:
        self.files.start()
        kinds = lab_kinds(self._reads)
        if kinds:
            opened = ClusterWatch.open(self.grader.kubeconfig, kinds, self.report)
            if isinstance(opened, str):
                self.table.notes.append(f"the cluster is not watched: {opened}")
            else:
                self.cluster = opened
                opened.start()
        self.table.notes += self.files.problems + (self.cluster.problems() if self.cluster else [])
        self.view.update(self.table, "watching", (self.grader.lab_root, sorted(kinds)))

    def _note(self, changes: list[Change]) -> None:
        """Changes taken: every step owed a grading, those they touch first."""
        if not changes:
            return
        first = touched(changes, self._reads)
        self._first |= first
        self._owed |= set(self.table.rows) or set(self.static) or {0}
        for number in self._owed:
            self.table.row(number).state = QUEUED
        self.table.last_change, self.table.changed_at = ", ".join(sorted({str(c) for c in changes})), time.monotonic()
        self.view.update(self.table, "changed", (changes, sorted(first & self._owed)))

    def _grade_next(self) -> None:
        steps = self._with_needs(self._first & self._owed) or set(self._owed)
        everything = steps >= set(self.table.rows) or 0 in steps
        chosen = None if everything else steps
        for number in steps - {0}:
            self.table.row(number).state = GRADING
        self.view.update(self.table, "grading", sorted(steps - {0}))
        self.gradings += 1
        folder = Path(self._scratch.name) / f"grading-{self.gradings}"
        try:
            outcome = Grading(self.grader, chosen, folder, self._step_done, self.warm).run(self._stopping.is_set)
        except OSError as error:  # no room for its folder, no inotify left: said, and tried again at the next change
            outcome = Outcome(-1, False, f"it could not start ({error})")
        self._graded(steps, chosen, folder, outcome)
        shutil.rmtree(folder, ignore_errors=True)
        if not self._stopping.is_set():
            self._note(self._take())

    def _with_needs(self, steps: set[int]) -> set[int]:
        found, todo = set(), list(steps)
        while todo:
            number = todo.pop()
            if number not in found:
                found.add(number)
                todo += self._needs.get(number, ())
        return found

    def _step_done(self, entry: dict[str, Any]) -> None:
        row = self.table.row(int(entry["number"]))
        row.entry, row.title, row.graded_at, row.state = entry, str(entry.get("title") or ""), time.monotonic(), ""
        self._needs[row.number] = set(entry.get("needs") or ())
        self._reads[row.number] = reads_of(entry, self.static.get(row.number))
        self.view.update(self.table, "step", row.number)

    def _graded(self, steps: set[int], chosen: set[int] | None, folder: Path, outcome: Outcome) -> None:
        document = read_report(folder / "report.json")
        if isinstance(document, dict):
            self.table.rubric = str(document.get("rubric_version") or self.table.rubric)
            self.table.lab_title = str(document.get("lab_title") or self.table.lab_title)
            for entry in document.get("steps") or []:
                self.table.row(int(entry["number"])).title = str(entry.get("title") or "")
        done = set(self.table.rows) | {0} if chosen is None else steps
        self._owed -= done
        self._first -= done
        for number in done - {0}:
            if self.table.row(number).state == GRADING:
                self.table.row(number).state = QUEUED if outcome.stopped else ""
        if not outcome.graded and not outcome.stopped:
            self._owed.clear()  # a grading that broke is not tried again until the next change
            self.table.notes.append(f"the grading ended with status {outcome.status}: {outcome.output.strip()}")
        self.view.update(self.table, "graded", outcome)

    def stop(self) -> None:
        self._stopping.set()
        self._changed.set()

    def _end(self) -> None:
        if self.warm is not None:
            self.warm.__exit__(None, None, None)
        self.files.stop()
        if self.cluster is not None:
            self.cluster.stop()
        self._scratch.cleanup()


def watch(grader: Grader, static: dict[int, Reads | None], view: View, until: Callable[[float], bool]) -> Watcher:
    """Run a watch in a thread until ``until(timeout)`` says to stop (it waits at most ``timeout`` seconds)."""
    watcher = Watcher(grader, static, view)
    thread = threading.Thread(target=watcher.run, name="gpulab-watch", daemon=True)
    thread.start()
    try:
        while thread.is_alive() and not until(0.5):
            continue
    finally:
        watcher.stop()
        thread.join()
    return watcher
