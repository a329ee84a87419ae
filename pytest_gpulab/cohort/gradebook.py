"""Grades into the LMS: the CSV its own gradebook import reads, one row per roster learner.

Canvas (Grades, Import): the columns of Canvas's own gradebook export, ``Student, ID, SIS User ID, SIS Login
ID, Section``, then the assignment's column, named as given (``Name (1234)`` names an existing assignment by
its ID; a bare name matches one by title or makes a new one), and a ``Points Possible`` row under the header,
as Canvas's export writes and its importer reads. Canvas finds the student by ID, then SIS User ID, then SIS
Login ID, then the name. Moodle (Grade administration, Import, CSV file): an identifier column (``Email
address``, ``Username`` or ``ID number``, mapped in the import to useremail, username or useridnumber),
``Full name`` (mapped to nothing) and the assignment's column. Moodle stops the whole import at a row whose
account it cannot find, so only roster learners are written, each with the identifier.

A graded learner gets the points earned. A roster learner with no bundle gets an empty grade (no grade, for
both importers), or 0 with ``missing_as_zero``; one whose bundle was refused, or whose grading failed or cannot
be read, always an empty grade: it is for the instructor to decide. Everything to look at before importing is
in the ``to-check`` file beside the CSV: bundles matching no roster row (with their points), roster rows
refused, learners not graded or with no bundle, rows Moodle cannot take. Usable without pytest:
:func:`write_gradebook`; also ``gpulab cohort-report RESULTS --gradebook canvas|moodle --roster FILE``.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .model import REFUSED_FILE
from .results import FORMULA_STARTS, Result, read_results, spreadsheet_safe
from .roster import Entry, Roster, read_roster

CANVAS, MOODLE = "canvas", "moodle"
CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "    Points Possible"
MOODLE_IDENTIFIERS = {"email": "Email address", "username": "Username", "id_number": "ID number"}
NO_BUNDLE = "no bundle"


class GradebookError(ValueError):
    """The gradebook cannot be written as asked (a sentence saying why)."""


@dataclass
class Row:
    entry: Entry
    grade: int | None
    status: str


@dataclass
class Gradebook:
    lms: str
    assignment: str
    possible: int | None
    rows: list[Row]
    to_check: list[tuple[str, str, str]] = field(default_factory=list)  # (learner, what, detail)
    identifier: str | None = None  # Moodle's


def assignment_refusal(name: str) -> str | None:
    if not name.strip():
        return "the assignment's name is empty"
    if name.startswith(FORMULA_STARTS) or any(ord(c) < 32 for c in name):
        return f"the assignment's name {name!r} starts like a spreadsheet formula or holds a control character"
    return None


def _row(entry: Entry, result: Result | None, missing_as_zero: bool) -> tuple[Row, tuple[str, str, str] | None]:
    if result is None:
        grade = 0 if missing_as_zero else None
        return Row(entry, grade, NO_BUNDLE), (entry.learner, NO_BUNDLE, "graded 0" if missing_as_zero else "no grade")
    if result.graded:
        return Row(entry, result.earned, result.status), None
    why = f"{result.status}: {result.reason or ''}; no grade written"
    return Row(entry, None, result.status), (entry.learner, "not graded", why)


def build(results: Path, roster: Roster, assignment: str | None = None, missing_as_zero: bool = False) -> Gradebook:
    every = read_results(results, REFUSED_FILE)
    read = {name.casefold(): result for name, result in every.items()}
    labs = Counter(result.lab for result in read.values() if result.graded and result.lab)
    name = assignment if assignment is not None else (labs.most_common(1)[0][0] if labs else "gpulab")
    if (refusal := assignment_refusal(name)) is not None:
        raise GradebookError(refusal)
    book = Gradebook("", name, None, [])
    book.to_check += [(learner, "roster row refused", f"line {line}: {why}") for line, learner, why in roster.refused]
    for entry in roster.entries:
        row, note = _row(entry, read.pop(entry.learner.casefold(), None), missing_as_zero)
        book.rows.append(row)
        book.to_check += [note] if note else []
    for result in read.values():
        points = f"{result.earned}/{result.possible}" if result.graded else result.status
        book.to_check.append((result.learner, "not on the roster", f"{points}; not in the gradebook"))
    possible = Counter(r.possible for r in every.values() if r.graded)
    book.possible = possible.most_common(1)[0][0] if possible else None
    if len(possible) > 1:
        book.to_check.append(
            ("", "points possible differ", ", ".join(f"{n} learners of {p}" for p, n in possible.items()))
        )
    return book


def canvas_table(book: Gradebook) -> list[list[object]]:
    rows: list[list[object]] = [[*CANVAS_STUDENT_COLUMNS, book.assignment]]
    rows.append([POINTS_POSSIBLE, "", "", "", "", "" if book.possible is None else book.possible])
    for row in book.rows:
        e = row.entry
        cells = [e.shown_name, e.canvas_id, e.sis_user_id, e.sis_login_id, e.section, row.grade]
        rows.append([spreadsheet_safe("" if cell is None else cell) for cell in cells])
    return rows


def moodle_identifier(entries: list[Entry], wanted: str | None = None) -> str:
    """The identifier column: ``wanted``, else the first of email, username and ID number every row has, else the
    one the most rows have."""
    if wanted is not None:
        if wanted not in MOODLE_IDENTIFIERS:
            raise GradebookError(f"the identifier {wanted!r} is not one of {', '.join(MOODLE_IDENTIFIERS)}")
        return wanted
    filled = {column: sum(bool(getattr(e, column)) for e in entries) for column in MOODLE_IDENTIFIERS}
    best = max(filled, key=lambda column: (filled[column] == len(entries), filled[column]))
    if not filled[best]:
        raise GradebookError("the roster gives no email, username or id_number, which Moodle finds accounts by")
    return best


def moodle_table(book: Gradebook, identifier: str) -> list[list[object]]:
    rows: list[list[object]] = [[MOODLE_IDENTIFIERS[identifier], "Full name", book.assignment]]
    for row in book.rows:
        if not getattr(row.entry, identifier):
            book.to_check.append((row.entry.learner, "not in the Moodle file", f"the roster gives no {identifier}"))
            continue
        cells = [getattr(row.entry, identifier), row.entry.shown_name, row.grade]
        rows.append([spreadsheet_safe("" if cell is None else cell) for cell in cells])
    return rows


def _write(path: Path, rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        csv.writer(stream).writerows(rows)


def to_check_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".csv") + ".to-check.csv")


def write_gradebook(
    results: Path,
    roster: Path,
    lms: str,
    *,
    assignment: str | None = None,
    missing_as_zero: bool = False,
    identifier: str | None = None,
    out: Path | None = None,
) -> tuple[Gradebook, Path]:
    """The LMS's CSV (default ``RESULTS/cohort.LMS.csv``) and its ``.to-check.csv`` beside it; raises
    :class:`GradebookError` (or the roster's ``RosterError``) with a sentence when it cannot be written."""
    if lms not in (CANVAS, MOODLE):
        raise GradebookError(f"the LMS {lms!r} is not one of {CANVAS}, {MOODLE}")
    book = build(results, read_roster(roster), assignment, missing_as_zero)
    book.lms, path = lms, out or results / f"cohort.{lms}.csv"
    if lms == CANVAS:
        table = canvas_table(book)
    else:
        book.identifier = moodle_identifier([row.entry for row in book.rows], identifier)
        table = moodle_table(book, book.identifier)
    _write(path, table)
    notes = [[spreadsheet_safe(cell) for cell in note] for note in book.to_check]
    _write(to_check_path(path), [["learner", "what", "detail"], *notes])
    return book, path
