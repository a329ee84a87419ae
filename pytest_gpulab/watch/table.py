"""The watch's table: a row per step with its last verdict (a report's step entry), when it was graded, and
whether a grading of it is owed or under way; the lines a view prints from it. Usable without a terminal."""

from __future__ import annotations

import textwrap
import threading
import time
from dataclasses import dataclass, field
from typing import Any

QUEUED, GRADING = "queued", "grading"
PASSED, NOT_GRADED = "passed", "not graded"


@dataclass
class Row:
    number: int
    title: str = ""
    entry: dict[str, Any] | None = None  # the last grading's step entry (pytest-gpulab/report)
    graded_at: float | None = None  # time.monotonic() of that grading
    state: str = ""  # QUEUED, GRADING, or "" (as last graded)

    @property
    def outcome(self) -> str:
        return str((self.entry or {}).get("outcome") or NOT_GRADED)

    @property
    def points(self) -> str:
        entry = self.entry or {}
        earned = entry.get("earned", 0) if self.entry is not None else "-"
        return f"{earned}/{entry.get('points', '?')}"

    def why(self) -> str | None:
        """The first failing check's sentence, named as the terminal summary names it."""
        entry = self.entry or {}
        if self.outcome in (PASSED, NOT_GRADED) or not entry.get("message"):
            return None
        text = " ".join(part for part in (entry.get("message"), entry.get("hint")) if part)
        checks = entry.get("checks") or []
        speaker = next((c for c in checks if c.get("outcome") == self.outcome and c.get("message")), None)
        named = f"{speaker.get('name')}: " if speaker is not None and len(checks) > 1 else ""
        return " ".join((named + text).split())


@dataclass
class Table:
    lab: str
    seed: int
    rows: dict[int, Row] = field(default_factory=dict)
    rubric: str = "?"
    lab_title: str = ""
    last_change: str | None = None
    changed_at: float | None = None
    notes: list[str] = field(default_factory=list)  # what is not watched, a grading that broke
    lock: threading.Lock = field(default_factory=threading.Lock)  # rows are added by the watch, read by a view's

    def row(self, number: int) -> Row:
        with self.lock:
            return self.rows.setdefault(number, Row(number))

    def in_order(self) -> list[Row]:
        with self.lock:
            return [self.rows[number] for number in sorted(self.rows)]

    def total(self) -> str:
        rows = self.in_order()
        earned = sum(int((row.entry or {}).get("earned") or 0) for row in rows)
        possible = sum(int((row.entry or {}).get("points") or 0) for row in rows)
        return f"total: {earned}/{possible} points · lab {self.lab} · rubric {self.rubric} · seed {self.seed}"


def age(since: float | None, now: float | None = None) -> str:
    if since is None:
        return ""
    seconds = int((now if now is not None else time.monotonic()) - since)
    return (
        f"{seconds}s ago" if seconds < 120 else f"{seconds // 60}m ago" if seconds < 7200 else f"{seconds // 3600}h ago"
    )


def status(row: Row) -> str:
    """The outcome as last graded, and what is under way: ``failed, grading...``."""
    if row.state in (GRADING, QUEUED):
        return f"{row.outcome}, {row.state}" if row.entry else row.state
    return row.outcome


def lines(table: Table, width: int, now: float | None = None, sentence_lines: int = 2) -> list[str]:
    """The table as the terminal shows it, ``width`` columns wide."""
    title_width = max(10, width - 44)
    head = f"{'step':>4}  {'title':<{title_width}} {'points':>7}  {'outcome':<19} {'graded':>7}"
    out = [head]
    for row in table.in_order():
        number = row.number
        title = row.title if len(row.title) <= title_width else row.title[: title_width - 3] + "..."
        out.append(
            f"{number:>4}  {title:<{title_width}} {row.points:>7}  {status(row):<19} {age(row.graded_at, now):>7}"
        )
        if why := row.why():
            out += textwrap.wrap(
                why, width - 1, initial_indent=" " * 8, subsequent_indent=" " * 8,
                max_lines=sentence_lines, placeholder=" ...",
            )  # fmt: skip
    out.append(table.total())
    return out
