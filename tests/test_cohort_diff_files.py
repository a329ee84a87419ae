"""The regrade diff on results folders written by hand: a learner whose folder is damaged is listed with why,
never skipped and never a crash, and a learner's name never becomes a spreadsheet formula or page markup.
(The diff on a real regrade: tests/test_regrade_diff.py.)"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from pytest_gpulab.cohort.diff import compare_folders, write_diff
from pytest_gpulab.cohort.diff_page import diff_section
from pytest_gpulab.cohort.model import Cohort
from pytest_gpulab.cohort.page import not_graded_table
from pytest_gpulab.cohort.regrade import Outcome
from pytest_gpulab.reports.report_file import write_atomically

GPULAB = str(Path(sys.executable).with_name("gpulab"))
FORMULA = "-2+3"  # a name a bundle may have ("-" first is allowed), which a spreadsheet would compute


def graded(results: Path, learner: str, earned: int, outcomes: dict[str, str], rubric: str = "2") -> None:
    """One learner's folder as a grading leaves it: a step 1 of 10 points with the given checks."""
    folder = results / learner
    steps = [{"number": 1, "title": "<b>one</b>", "outcome": "passed" if earned == 10 else "failed", "earned": earned,
              "points": 10, "checks": [{"id": check, "outcome": outcome} for check, outcome in outcomes.items()]}]  # fmt: skip
    write_atomically(folder / "report.json", {"complete": True, "earned": earned, "possible": 10, "steps": steps})
    outcome = Outcome(learner, f"{learner}.gpulab.tar.gz", "0" * 64, "graded", lab="gpuop", rubric_graded=rubric,
                      earned=earned, possible=10)  # fmt: skip
    write_atomically(folder / "outcome.json", outcome.as_dict())


def test_damaged_folders_are_listed_with_why(tmp_path: Path):
    old, new = tmp_path / "old", tmp_path / "new"
    for results, rubric in ((old, "2"), (new, "3")):
        graded(results, "ada", 10, {"a": "passed"}, rubric)
        graded(results, "bo", 10, {"a": "passed"}, rubric)
        graded(results, "cy", 10, {"a": "passed"}, rubric)
    (new / "ada" / "report.json").write_text("{not json")  # corrupt report: the points are still known
    (new / "bo" / "outcome.json").unlink()  # an unfinished grading
    (new / "cy" / "outcome.json").write_text("[1, 2]")  # not an object
    rows = {row.learner: row for row in compare_folders(old, new).learners}
    assert rows["ada"].change == "same" and "new: report.json cannot be read" in rows["ada"].notes[0]
    assert (rows["bo"].change, rows["bo"].new.status) == ("not graded", "unreadable")  # type: ignore[union-attr]
    assert "outcome.json is missing" in rows["bo"].notes[0]
    assert "outcome.json is not a JSON object" in rows["cy"].notes[0]


def test_checks_added_or_removed_by_a_rubric_are_absent_on_one_side(tmp_path: Path):
    old, new = tmp_path / "old", tmp_path / "new"
    graded(old, "ada", 10, {"a": "passed", "gone": "passed"})
    graded(new, "ada", 0, {"a": "failed", "added": "failed"}, "3")
    [row] = compare_folders(old, new).learners
    assert row.change == "lost"
    assert [(c.check, c.old, c.new) for c in row.checks] == [
        ("a", "passed", "failed"), ("added", "absent", "failed"), ("gone", "passed", "absent")
    ]  # fmt: skip


def test_a_learner_name_is_text_in_the_csv_and_the_page(tmp_path: Path):
    old, new = tmp_path / "old", tmp_path / "new"
    graded(old, FORMULA, 10, {"a": "passed"})
    graded(new, FORMULA, 0, {"a": "failed"})
    graded(new, "<b>x", 0, {"a": "failed"})
    diff = write_diff(old, new, tmp_path / "out")
    with open(tmp_path / "out" / "diff.csv", newline="", encoding="utf-8") as stream:
        learners = [row["learner"] for row in csv.DictReader(stream)]
    assert sorted(learners) == ["'" + FORMULA, "<b>x"]
    page = diff_section(diff)
    assert "<b>x" not in page and "&lt;b&gt;x" in page
    assert "<b>one</b>" not in page and "&lt;b&gt;one&lt;/b&gt;" in page


def test_cohort_diff_says_when_a_folder_is_missing(tmp_path: Path):
    said = subprocess.run(
        [GPULAB, "cohort-diff", str(tmp_path / "nothing"), str(tmp_path)], capture_output=True, text=True
    )
    assert said.returncode == 1 and "nothing: not a results folder" in said.stderr, said.stderr
    assert not (tmp_path / "cohort.diff").exists()


def test_cohort_report_compare_adds_the_section(tmp_path: Path):
    old, new = tmp_path / "old", tmp_path / "new"
    graded(old, "ada", 10, {"a": "passed"})
    graded(new, "ada", 0, {"a": "failed"})
    made = subprocess.run([GPULAB, "cohort-report", str(new), f"--compare={old}"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert 'data-learner="ada" data-change="lost"' in (new / "cohort.html").read_text()
    assert json.loads((new / "cohort.diff" / "diff.json").read_text())["summary"]["learners"]["lost"] == 1


def test_a_bundle_refused_by_its_name_is_listed_once():
    cohort = Cohort(
        labs=[],
        rubrics=[],
        learners=[],
        steps={},
        refused=[{"bundle": "../evil.tar.gz", "reason": "not a bundle name"}],
    )
    table = not_graded_table(cohort)
    assert table.count('class="refused-by-name"') == 1
    assert "../evil.tar.gz" in table
