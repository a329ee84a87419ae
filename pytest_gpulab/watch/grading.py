"""One grading of the watch: ``pytest --lab LAB`` in a subprocess, its grading report followed as it is written.

A grading of the watch is a learner's grading, the same command with the same settings (and the watch's seed),
optionally of some steps only (``--step``): the same sandbox, contract and verdicts. The plugin rewrites its
report after every check (atomically, by a rename), so a step is known as soon as its last check is: the
report's folder is watched with inotify for that rename. A stopped grading is sent SIGINT, as Ctrl-C would,
and waited for (then killed, with its process group, if it does not end). Usable without pytest.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..cohort.warm import WarmGradings
from . import inotify

NOT_GRADED = "not graded"
CHILD = "GPULAB_WATCH_GRADING"  # set in a grading's environment: its pytest never watches in turn
STOP_SECONDS = 30  # a grading sent SIGINT ends within this, else its process group is killed
READ_TIMEOUT = 0.25
GRADING_SECONDS = 3600.0  # a forked grading's bound (its checks have their own time limits, far shorter)


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


class Spawned:
    """A grading as a process of its own (its own session: Ctrl-C at the terminal reaches the watch, which stops it)."""

    def __init__(self, command: list[str], folder: Path, sink: BinaryIO) -> None:
        self.process = subprocess.Popen(
            command, cwd=folder, env={**os.environ, CHILD: "1"},
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.ended = os.pidfd_open(self.process.pid)

    def done(self) -> bool:
        return self.process.poll() is not None

    def status(self) -> int:
        return self.process.wait()

    def interrupt(self) -> None:
        """SIGINT to the grading's process group, as Ctrl-C; killed with it if it has not ended in STOP_SECONDS."""
        try:
            os.killpg(self.process.pid, signal.SIGINT)
            self.process.wait(STOP_SECONDS)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def close(self) -> None:
        os.close(self.ended)


class Forked:
    """A grading forked from a warm server (cohort/warm.py): the same `python -m pytest`, without its imports."""

    def __init__(self, warm: WarmGradings, command: list[str], folder: Path, output: Path) -> None:
        self.pid: int | None = None
        self.forked = threading.Event()
        self._status = 3
        self.ended, self._end = os.pipe()
        run = lambda: warm.run(  # noqa: E731
            command[3:], cwd=folder, env={**os.environ, CHILD: "1"}, output=output, timeout=GRADING_SECONDS,
            started=self._started,
        )  # fmt: skip
        self._thread = threading.Thread(target=self._wait, args=(run,), name="gpulab-watch-grading", daemon=True)
        self._thread.start()

    def _started(self, pid: int) -> None:
        self.pid = pid
        self.forked.set()

    def _wait(self, run: Callable[[], int]) -> None:
        try:
            self._status = run()
        except (OSError, subprocess.TimeoutExpired):
            self._status = 3
        finally:
            os.write(self._end, b"x")

    def done(self) -> bool:
        return not self._thread.is_alive()

    def status(self) -> int:
        self._thread.join()
        return self._status

    def interrupt(self) -> None:
        """SIGINT to the grading, as Ctrl-C; SIGKILL if it has not ended in STOP_SECONDS."""
        for signum in (signal.SIGINT, signal.SIGKILL):
            if self.forked.wait(STOP_SECONDS) and self.pid is not None and not self.done():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signum)
            self._thread.join(STOP_SECONDS)
            if self.done():
                return

    def close(self) -> None:
        os.close(self.ended)
        os.close(self._end)


class Grading:
    """One run of ``grader`` over ``steps`` (None: all) in ``folder``; ``step_done`` gets each finished step's entry.
    With ``warm``, the run is forked from that server, else a process of its own."""

    def __init__(
        self,
        grader: Grader,
        steps: set[int] | None,
        folder: Path,
        step_done: Callable[[dict[str, Any]], None],
        warm: WarmGradings | None = None,
    ) -> None:
        self.grader, self.steps, self.folder, self.step_done, self.warm = grader, steps, folder, step_done, warm
        self.report = folder / "report.json"
        self._delivered: dict[int, str] = {}

    def run(self, stopping: Callable[[], bool]) -> Outcome:
        """Grade, delivering steps as they finish, until the run ends or ``stopping()`` holds (then it is stopped)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.report.unlink(missing_ok=True)
        output = self.folder / "output.txt"
        command = self.grader.command(self.steps, self.report)
        with inotify.Inotify() as notify, output.open("wb") as sink:
            notify.add(self.folder, inotify.MOVED_TO | inotify.CLOSE_WRITE)
            running = (
                Forked(self.warm, command, self.folder, output) if self.warm else Spawned(command, self.folder, sink)
            )
            try:
                stopped = self._follow(running, notify, stopping)
                status = running.status()
            finally:
                running.close()
        self._deliver()
        tail = "" if status in (0, 1) else output.read_text(errors="replace")[-2000:]
        return Outcome(status, stopped, tail)

    def _follow(self, running: Spawned | Forked, notify: inotify.Inotify, stopping: Callable[[], bool]) -> bool:
        while not running.done():
            if stopping():
                running.interrupt()
                return True
            if any(event.name == self.report.name for event in notify.read(READ_TIMEOUT, wake=running.ended)):
                self._deliver()
        return False

    def _deliver(self) -> None:
        for entry in finished_steps(read_report(self.report), self.steps):
            said = json.dumps(entry, sort_keys=True)
            if self._delivered.get(entry["number"]) != said:
                self._delivered[entry["number"]] = said
                self.step_done(entry)
