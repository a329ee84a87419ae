"""The course roster the LMS gradebook is written against (``cohort-report --gradebook ... --roster FILE``).

A CSV file, UTF-8 (a byte-order mark is allowed), with a header row. Its columns, by name (case, spaces and
``_`` do not matter; any other column is ignored):

    learner        required: the learner's name in the results (the bundle's name, or grade-batch's roster's)
    file           the bundle's file name: ignored here, so one file can also be grade-batch's --roster
    name           the name the LMS shows (Canvas's Student column); default: the learner
    email          the LMS account's email address (Moodle: useremail)
    username       the LMS account's username (Moodle: username)
    id_number      the LMS account's ID number (Moodle: useridnumber)
    canvas_id      Canvas's user ID (its ID column: digits)
    sis_user_id    Canvas's SIS User ID
    sis_login_id   Canvas's SIS Login ID
    section        Canvas's Section

A row is refused, with why, when its learner is empty or repeated (case folded: both rows), when its Canvas ID
is not digits, or when a value an LMS matches accounts by (email, username, ID number, SIS IDs) starts like a
spreadsheet formula (``=``, ``+``, ``-``, ``@``): written as it is it could run in a spreadsheet, and made safe
it would no longer match the account. Usable without pytest: :func:`read_roster`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from pathlib import Path

from .results import FORMULA_STARTS


class RosterError(ValueError):
    """The roster cannot be read at all (a sentence saying why)."""


@dataclass(frozen=True)
class Entry:
    learner: str
    name: str = ""
    email: str = ""
    username: str = ""
    id_number: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""

    @property
    def shown_name(self) -> str:
        return self.name or self.learner


COLUMNS = tuple(f.name for f in fields(Entry))
MATCHED_BY = ("email", "username", "id_number", "sis_user_id", "sis_login_id")  # values an LMS finds accounts by


@dataclass
class Roster:
    entries: list[Entry]
    refused: list[tuple[int, str, str]]  # (line, learner, why)


def _column(header: str) -> str:
    return header.strip().lstrip("\ufeff").lower().replace(" ", "_").replace("-", "_")


def _why_refused(entry: Entry) -> str | None:
    if not entry.learner:
        return "no learner name"
    if entry.canvas_id and not entry.canvas_id.isdigit():
        return f"canvas_id {entry.canvas_id!r} is not Canvas's user ID (digits)"
    for column in MATCHED_BY:
        if getattr(entry, column).startswith(FORMULA_STARTS):
            return f"{column} {getattr(entry, column)!r} starts like a spreadsheet formula"
    return None


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as stream:
            rows = list(csv.reader(stream))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise RosterError(f"the roster {path} cannot be read: {error}") from None
    if not rows or "learner" not in [_column(cell) for cell in rows[0]]:
        raise RosterError(
            f"the roster {path} has no header row with a 'learner' column (and: {', '.join(COLUMNS[1:])})"
        )
    return [_column(cell) for cell in rows[0]], rows[1:]


def read_roster(path: Path) -> Roster:
    header, rows = _rows(path)
    entries: list[tuple[int, Entry]] = []
    refused: list[tuple[int, str, str]] = []
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        values = {column: cell.strip() for column, cell in zip(header, row, strict=False) if column in COLUMNS}
        entry = Entry(**{"learner": "", **values})
        if (why := _why_refused(entry)) is not None:
            refused.append((line, entry.learner, why))
        else:
            entries.append((line, entry))
    folded: dict[str, list[int]] = {}
    for line, entry in entries:
        folded.setdefault(entry.learner.casefold(), []).append(line)
    repeated = {line for lines in folded.values() if len(lines) > 1 for line in lines}
    refused += [(line, e.learner, "the learner is on more than one row") for line, e in entries if line in repeated]
    kept = [entry for line, entry in entries if line not in repeated]
    return Roster(kept, sorted(refused))
