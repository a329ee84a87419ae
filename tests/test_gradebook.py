"""Grades into the LMS: the Canvas and Moodle CSVs read back with Python's csv module, as their importers read
them, against the roster. The formats checked are those of Canvas's gradebook importer (instructure/canvas-lms,
app/models/gradebook_importer.rb: the header, a Points Possible row, "Name (id)") and of Moodle's CSV grade
import (moodle/moodle, grade/import/csv/classes/load_data.php: an identifier column mapped to useremail,
username or useridnumber; '' or '-' is no grade; a row whose account is not found stops the import)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpulab.cohort.gradebook import GradebookError, write_gradebook
from pytest_gpulab.cohort.model import REFUSED_FILE
from pytest_gpulab.cohort.regrade import Outcome
from pytest_gpulab.cohort.roster import RosterError
from pytest_gpulab.reports.report_file import write_atomically

GPULAB = str(Path(sys.executable).with_name("gpulab"))
ASSIGNMENT = "GPU lab (1234)"
EVIL_NAME = '=HYPERLINK("http://x","y")'
ROSTER = [
    ["learner", "file", "name", "email", "username", "id_number", "canvas_id", "sis_user_id", "sis_login_id", "section"],
    ["ada", "ada.gpulab.tar.gz", "Lovelace, Ada", "ada@uni.example", "ada", "S001", "101", "SIS1", "ada@uni", "A"],
    ["bo", "bo.gpulab.tar.gz", EVIL_NAME, "bo@uni.example", "bo", "S002", "", "SIS2", "bo@uni", "A"],
    ["cy", "", "Cy", "cy@uni.example", "cy", "S003", "103", "", "", "B"],  # no bundle
    ["dee", "", "Dee", "dee@uni.example", "dee", "S004", "", "", "", "B"],  # a bundle refused
    ["eve", "", "Eve", "@SUM(1)", "eve", "S005", "", "", "", "B"],  # an email a spreadsheet would compute
    ["fay", "", "Fay", "", "fay", "S006", "", "", "", "B"],  # no email: Moodle by email cannot take her
]  # fmt: skip


def learner(results: Path, name: str, status: str, earned: int | None = None, reason: str | None = None) -> None:
    outcome = Outcome(name, f"{name}.gpulab.tar.gz", "0" * 64, status, reason, lab="gpuop", rubric_graded="2",
                      earned=earned, possible=100 if earned is not None else None)  # fmt: skip
    write_atomically(results / name / "outcome.json", outcome.as_dict())
    write_atomically(results / name / "report.json", {"complete": True, "steps": []})


@pytest.fixture
def cohort(tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    learner(results, "ada", "graded", 90)
    learner(results, "bo", "graded", 100)
    learner(results, "dee", "refused", reason="the bundle cannot be read")
    learner(results, "fay", "graded", 70)
    learner(results, "zed", "graded", 55)  # on no roster row
    write_atomically(results / REFUSED_FILE, {"refused": [{"bundle": "x y.tar.gz", "reason": "a bad name"}]})
    roster = tmp_path / "roster.csv"
    with open(roster, "w", newline="", encoding="utf-8") as stream:
        csv.writer(stream).writerows(ROSTER)
    return results, roster


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))


def test_canvas_csv_has_canvas_s_columns_and_a_row_per_roster_learner(cohort: tuple[Path, Path]):
    results, roster = cohort
    made = subprocess.run([GPULAB, "cohort-report", str(results), "--gradebook=canvas", f"--roster={roster}",
                           f"--assignment={ASSIGNMENT}"], capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    header, points, *rows = read_rows(results / "cohort.canvas.csv")
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
    assert re.fullmatch(r"(.*)\s\((\d+)\)", header[5]).groups() == ("GPU lab", "1234")  # type: ignore[union-attr]
    assert "Points Possible" in points[0] and points[5] == "100"
    assert [row[0] for row in rows] == ["Lovelace, Ada", "'" + EVIL_NAME, "Cy", "Dee", "Fay"]  # eve's row refused
    assert {row[0]: row[1:] for row in rows}["Lovelace, Ada"] == ["101", "SIS1", "ada@uni", "A", "90"]
    assert [row[5] for row in rows] == ["90", "100", "", "", "70"]
    assert all(len(row) == len(header) for row in rows)
    assert "zed: not on the roster: 55/100" in made.stderr and "x y.tar.gz: not on the roster" in made.stderr


def test_moodle_csv_has_an_identifier_column_the_roster_fills(cohort: tuple[Path, Path]):
    results, roster = cohort
    book, path = write_gradebook(results, roster, "moodle", assignment="GPU lab", identifier="email")
    header, *rows = read_rows(path)
    assert header == ["Email address", "Full name", "GPU lab"]
    emails = {row[3]: row[0] for row in ROSTER[1:]}
    assert [row[0] for row in rows] == ["ada@uni.example", "bo@uni.example", "cy@uni.example", "dee@uni.example"]
    assert all(emails[row[0]] for row in rows), "every row names a roster account"
    assert [row[2] for row in rows] == ["90", "100", "", ""]
    assert all(cell == "" or cell.isdigit() for cell in (row[2] for row in rows)), "a grade or no grade"
    checks = {(learner, what) for learner, what, _ in book.to_check}
    assert {("fay", "not in the Moodle file"), ("eve", "roster row refused"), ("zed", "not on the roster"),
            ("dee", "not graded"), ("cy", "no bundle")} <= checks  # fmt: skip
    assert read_rows(path.with_name("cohort.moodle.to-check.csv"))[0] == ["learner", "what", "detail"]


def test_moodle_picks_the_identifier_every_row_has(cohort: tuple[Path, Path]):
    results, roster = cohort
    book, path = write_gradebook(results, roster, "moodle", missing_as_zero=True)
    header, *rows = read_rows(path)
    assert (book.identifier, header[0]) == ("username", "Username")  # fay has no email, everyone a username
    assert {row[0]: row[2] for row in rows} == {"ada": "90", "bo": "100", "cy": "0", "dee": "", "fay": "70"}


def test_bad_input_is_said_not_raised_past_the_cli(cohort: tuple[Path, Path], tmp_path: Path):
    results, roster = cohort
    (tmp_path / "no-header.csv").write_text("ada,ada.gpulab.tar.gz\n")
    with pytest.raises(RosterError, match="no header row with a 'learner' column"):
        write_gradebook(results, tmp_path / "no-header.csv", "canvas")
    with pytest.raises(GradebookError, match="starts like a spreadsheet formula"):
        write_gradebook(results, roster, "canvas", assignment="=1+1")
    said = subprocess.run([GPULAB, "cohort-report", str(results), "--gradebook=moodle", f"--roster={tmp_path / 'none'}"],
                          capture_output=True, text=True)  # fmt: skip
    assert said.returncode == 1 and "cannot be read" in said.stderr, said.stderr
