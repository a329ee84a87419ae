"""How the watch shows itself: a live table redrawn in place on a terminal (plain ANSI: home, clear, lines), or,
when its output is not a terminal (``gpulab watch LAB | tee``), a line for each change and each new verdict."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from .changes import Change
from .grading import Outcome
from .table import Table, lines

HOME, CLEAR_LINE, CLEAR_BELOW = "\x1b[H", "\x1b[K", "\x1b[J"  # each line overwritten in place: no flicker
REFRESH_SECONDS = 1.0  # the rows' ages tick
NOTES_SHOWN = 3


def watching_line(root: Path, kinds: list[str]) -> str:
    cluster = f"and the cluster's {', '.join(kinds)}" if kinds else "(no step reads the cluster)"
    return f"watching {root} {cluster}"


class LiveView:
    """The table, redrawn after every update and every second (for the ages), until closed."""

    def __init__(self, out: TextIO, header: list[str]) -> None:
        self.out, self.header = out, header
        self.table: Table | None = None
        self.watching = ""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="gpulab-watch-view", daemon=True)
        self._ticker.start()

    def update(self, table: Table, event: str, detail: Any = None) -> None:
        if event == "watching":
            self.watching = watching_line(*detail)
        self.table = table
        self.draw()

    def draw(self) -> None:
        with self._lock:
            if self.table is None or self._closed.is_set():
                return
            size = shutil.get_terminal_size((100, 40))
            width = max(60, size.columns)
            body = [*self.header, *lines(self.table, width), ""]
            if self.table.last_change:
                body.append(f"last change: {self.table.last_change}"[: width - 1])
            body += [f"note: {note}"[: width - 1] for note in self.table.notes[-NOTES_SHOWN:]]
            body += [self.watching[: width - 1], "Ctrl-C stops the watch"]
            body = body[: max(1, size.lines - 1)]  # a taller table would scroll, and the next draw would not cover it
            self.out.write(HOME + "".join(f"{line}{CLEAR_LINE}\n" for line in body) + CLEAR_BELOW)
            self.out.flush()

    def _tick(self) -> None:
        while not self._closed.wait(REFRESH_SECONDS):
            self.draw()

    def close(self) -> None:
        self._closed.set()
        self._ticker.join(5)


class PlainView:
    """A line per change, per step whose verdict changed, and per total that changed; nothing redrawn."""

    def __init__(self, out: TextIO, header: list[str]) -> None:
        self.out = out
        self._said: dict[int, tuple[Any, ...]] = {}
        self._total = ""
        self._notes = 0
        self._say(*header)

    def _say(self, *text: str) -> None:
        for line in text:
            self.out.write(line + "\n")
        self.out.flush()

    def update(self, table: Table, event: str, detail: Any = None) -> None:
        stamp = time.strftime("%H:%M:%S")
        if event == "watching":
            self._say(watching_line(*detail))
        elif event == "changed":
            changes: list[Change] = detail[0]
            first = f"; step{'s' * (len(detail[1]) > 1)} {', '.join(map(str, detail[1]))} first" if detail[1] else ""
            shown = ", ".join(sorted({str(change) for change in changes})[:5])
            self._say(f"{stamp} changed: {shown}{' ...' if len(changes) > 5 else ''}{first}")
        elif event == "step":
            self._step(table, int(detail), stamp)
        elif event == "graded":
            self._graded(table, detail, stamp)
        for note in table.notes[self._notes :]:
            self._say(f"{stamp} note: {note}")
        self._notes = len(table.notes)

    def _step(self, table: Table, number: int, stamp: str) -> None:
        row = table.rows[number]
        said = (row.outcome, row.points, row.why())
        if self._said.get(number) != said:
            self._said[number] = said
            why = f": {row.why()}" if row.why() else ""
            self._say(f"{stamp} step {number} {row.outcome} {row.points} ({row.title}){why}")

    def _graded(self, table: Table, outcome: Outcome, stamp: str) -> None:
        if outcome.stopped:
            return
        if table.total() != self._total:
            self._total = table.total()
            self._say(f"{stamp} {self._total}")

    def close(self) -> None:
        self.out.flush()
