"""A results folder as ``gpulab grade-batch`` leaves it, read for the regrade diff and the LMS gradebook.

Every learner's folder is read, whatever it holds: a folder without ``outcome.json``, or with one that is
not a JSON object, is a learner whose result is ``unreadable``, with why; a graded learner whose
``report.json`` is missing or corrupt keeps the points ``outcome.json`` gives and says the checks are
unknown. Bundles refused by their name (``cohort.refused.json``) are read too. Nothing here raises for
what a folder holds. Also: :func:`spreadsheet_safe`, for every text cell a CSV of ours writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .regrade import GRADED, REFUSED

UNREADABLE = "unreadable"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a cell a spreadsheet would read as a formula


def spreadsheet_safe(value: object) -> object:
    """A text cell that starts like a formula, prefixed with ``'`` so that a spreadsheet shows it as text;
    numbers and other cells as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


@dataclass
class StepResult:
    title: str
    outcome: str
    earned: int
    points: int


@dataclass
class Result:
    """One learner's folder (or one bundle refused by its name)."""

    learner: str
    status: str
    reason: str | None = None
    lab: str | None = None
    rubric: str | None = None
    earned: int | None = None
    possible: int | None = None
    steps: dict[int, StepResult] = field(default_factory=dict)
    checks: dict[str, tuple[int, str]] = field(default_factory=dict)  # check id: (step, outcome)
    report_problem: str | None = None  # why the checks of a graded learner are unknown

    @property
    def graded(self) -> bool:
        return self.status == GRADED and self.earned is not None and self.possible is not None

    @property
    def checks_known(self) -> bool:
        return self.graded and self.report_problem is None


def _read_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in ``path``, or None and why not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except (OSError, ValueError) as error:
        return None, f"{path.name} cannot be read: {error}"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _add_report(result: Result, folder: Path) -> None:
    report, problem = _read_object(folder / "report.json")
    steps = report.get("steps") if report else None
    if report is None or not isinstance(steps, list):
        result.report_problem = problem or "report.json holds no steps"
        return
    try:
        for step in steps:
            number = int(step["number"])
            result.steps[number] = StepResult(str(step.get("title", "")), str(step.get("outcome", "")),
                                              int(step.get("earned") or 0), int(step.get("points") or 0))  # fmt: skip
            for check in step.get("checks") or []:
                result.checks[str(check["id"])] = (number, str(check.get("outcome", "")))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        result.steps, result.checks = {}, {}
        result.report_problem = f"report.json is not a grading report: {error!r}"


def read_learner(folder: Path) -> Result:
    outcome, problem = _read_object(folder / "outcome.json")
    if outcome is None:
        return Result(folder.name, UNREADABLE, f"{problem}: the grading did not finish, or its folder was damaged")
    reason = outcome.get("reason")
    rubric = outcome.get("rubric_graded") or outcome.get("rubric_bundled")
    result = Result(
        folder.name, str(outcome.get("status") or UNREADABLE), str(reason) if reason else None,
        str(outcome["lab"]) if outcome.get("lab") else None, str(rubric) if rubric else None,
        _integer(outcome.get("earned")), _integer(outcome.get("possible")),
    )  # fmt: skip
    if result.status == GRADED and not result.graded:
        result.status, result.reason = UNREADABLE, "outcome.json says graded but gives no points"
    if result.graded:
        _add_report(result, folder)
    return result


def learner_folders(results: Path) -> list[Path]:
    """Every learner's folder: not hidden, and not one of the cohort report's own (``cohort.*``)."""
    try:
        children = sorted(results.iterdir())
    except OSError:
        return []
    return [
        c for c in children if c.is_dir() and not c.name.startswith(".") and not c.name.lower().startswith("cohort.")
    ]


def read_results(results: Path, refused_file: str) -> dict[str, Result]:
    """Every learner of ``results`` by name, then every bundle refused by its name (by its file's name), as
    ``refused_file`` (the batch's ``cohort.refused.json``) lists them."""
    read = {folder.name: read_learner(folder) for folder in learner_folders(results)}
    refused, _ = _read_object(results / refused_file)
    for entry in (refused or {}).get("refused") or []:
        if isinstance(entry, dict) and isinstance(entry.get("bundle"), str) and entry["bundle"] not in read:
            read[entry["bundle"]] = Result(entry["bundle"], REFUSED, str(entry.get("reason") or ""))
    return read
