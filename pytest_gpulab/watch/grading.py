"""One grading of the watch: ``pytest --lab LAB`` in a subprocess, its grading report followed as it is written.

A grading of the watch is a learner's grading, the same command with the same settings (and the watch's seed),
optionally of some steps only (``--step``): the same sandbox, contract and verdicts. The plugin rewrites its
report after every check (atomically, by a rename), so a step is known as soon as its last check is: the
report's folder is watched with inotify for that rename. A stopped grading is sent SIGINT, as Ctrl-C would,
and waited for (then killed, with its process group, if it does not end). Usable without pytest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import inotify

NOT_GRADED = "not graded"
CHILD = "GPULAB_WATCH_GRADING"  # set in a grading's environment: its pytest never watches in turn
STOP_SECONDS = 30  # a grading sent SIGINT ends within this, else its process group is killed
READ_TIMEOUT = 0.25


@dataclass(frozen=True)
class Grader:
    """How the watch grades: the settings each of its gradings passes to ``pytest --lab``."""

    lab: str
    lab_root: Path
    kubeconfig: str | None
    seed: int
    lab_dirs: Sequence[Path] = ()
    options: Sequence[str] = field(default_factory=tuple)  # more `--option=value` settings, passed as given

    def command(self, steps: Iterable[int] | None, report: Path) -> list[str]:
        """pytest's own temporary folders go beside the report (``--basetemp``), and go with the watch's."""
        chosen = [f"--step={','.join(map(str, sorted(steps)))}"] if steps is not None else []
        return [
            sys.executable, "-m", "pytest", f"--lab={self.lab}", f"--lab-root={self.lab_root}",
            *([f"--kubeconfig={self.kubeconfig}"] if self.kubeconfig else []), f"--lab-seed={self.seed}",
            *(f"--lab-dir={path}" for path in self.lab_dirs), *self.options, *chosen,
            f"--gpulab-report={report}", f"--basetemp={report.parent / 'tmp'}", "-p", "no:cacheprovider", "-q",
        ]  # fmt: skip


def finished_steps(document: Any, wanted: set[int] | None) -> list[dict[str, Any]]:
    """The report's step entries whose every check has an outcome, of the steps ``wanted`` (None: all)."""
    steps = document.get("steps") if isinstance(document, dict) else None
    found = []
    for entry in steps if isinstance(steps, list) else []:
        if not isinstance(entry, dict) or (wanted is not None and entry.get("number") not in wanted):
            continue
        checks = entry.get("checks") or []
        if entry.get("outcome") != NOT_GRADED and all(check.get("outcome") != NOT_GRADED for check in checks):
            found.append(entry)
    return found


def read_report(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Outcome:
    """How a grading ended: its exit status, and its output's end when it did not end as graded."""

    status: int
    stopped: bool
    output: str = ""

    @property
    def graded(self) -> bool:
        return self.status in (0, 1) and not self.stopped


class Grading:
    """One run of ``grader`` over ``steps`` (None: all) in ``folder``; ``step_done`` gets each finished step's entry."""

    def __init__(
        self, grader: Grader, steps: set[int] | None, folder: Path, step_done: Callable[[dict[str, Any]], None]
    ) -> None:
        self.grader, self.steps, self.folder, self.step_done = grader, steps, folder, step_done
        self.report = folder / "report.json"
        self._delivered: dict[int, str] = {}

    def run(self, stopping: Callable[[], bool]) -> Outcome:
        """Grade, delivering steps as they finish, until the run ends or ``stopping()`` holds (then it is stopped)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.report.unlink(missing_ok=True)
        output = self.folder / "output.txt"
        with inotify.Inotify() as notify, output.open("wb") as sink:
            notify.add(self.folder, inotify.MOVED_TO | inotify.CLOSE_WRITE)
            process = subprocess.Popen(
                self.grader.command(self.steps, self.report), cwd=self.folder, env={**os.environ, CHILD: "1"},
                stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            stopped = self._follow(process, notify, stopping)
        self._deliver()
        status = process.returncode
        tail = "" if status in (0, 1) else output.read_text(errors="replace")[-2000:]
        return Outcome(status, stopped, tail)

    def _follow(self, process: subprocess.Popen[bytes], notify: inotify.Inotify, stopping: Callable[[], bool]) -> bool:
        ended = os.pidfd_open(process.pid)
        try:
            while process.poll() is None:
                if stopping():
                    stop(process)
                    return True
                if any(event.name == self.report.name for event in notify.read(READ_TIMEOUT, wake=ended)):
                    self._deliver()
        finally:
            os.close(ended)
        return False

    def _deliver(self) -> None:
        for entry in finished_steps(read_report(self.report), self.steps):
            said = json.dumps(entry, sort_keys=True)
            if self._delivered.get(entry["number"]) != said:
                self._delivered[entry["number"]] = said
                self.step_done(entry)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the grading's process group, as Ctrl-C; killed with it if it has not ended in STOP_SECONDS."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(STOP_SECONDS)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
