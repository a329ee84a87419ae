"""The regrade diff: two results folders of the same bundles, OLD and NEW, compared learner by learner.

For each learner: the status, points and rubric version before and after, whether they gained, lost or
stayed the same (by the share of the points, so a rubric that changes the total compares fairly), and
every check whose outcome changed (``absent`` where a rubric added or removed it). A learner with no
bundle in one folder is listed as ``only in old`` or ``only in new``; one not graded on a side as
``not graded``; an unreadable folder or report is said so in the row's note. The summary counts the
learners of each kind, and, per step, the learners who gained, lost or kept that step's points.
Written as ``diff.csv`` (a row per learner) and ``diff.json``. Usable without pytest:
:func:`compare_folders`, :func:`write_diff`; also ``gpulab cohort-diff OLD NEW``.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..reports.report_file import write_atomically
from .model import REFUSED_FILE
from .results import Result, read_results, spreadsheet_safe

GAINED, LOST, SAME = "gained", "lost", "same"
ONLY_OLD, ONLY_NEW, NOT_GRADED = "only in old", "only in new", "not graded"
KINDS = (GAINED, LOST, SAME, ONLY_OLD, ONLY_NEW, NOT_GRADED)
ABSENT = "absent"
DIFF_FOLDER = "cohort.diff"  # inside a results folder; a learner can never be named cohort.*


@dataclass(frozen=True)
class CheckChange:
    check: str
    step: int
    old: str
    new: str


@dataclass
class LearnerDiff:
    learner: str
    change: str
    old: Result | None
    new: Result | None
    checks: list[CheckChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Diff:
    old_folder: str
    new_folder: str
    learners: list[LearnerDiff]
    steps: dict[int, dict[str, Any]]  # number: title, gained, lost, same

    def counts(self) -> dict[str, int]:
        found = Counter(row.change for row in self.learners)
        return {kind: found[kind] for kind in KINDS}


def _ordered(earned_old: int, possible_old: int, earned_new: int, possible_new: int) -> str:
    """Gained, lost or the same, by the share of the points (cross-multiplied: no rounding)."""
    before, after = earned_old * max(possible_new, 1), earned_new * max(possible_old, 1)
    return GAINED if after > before else LOST if after < before else SAME


def _check_changes(old: Result, new: Result) -> list[CheckChange]:
    changes = []
    for check in sorted(old.checks.keys() | new.checks.keys()):
        step, before = old.checks.get(check, (new.checks.get(check, (0, ""))[0], ABSENT))
        after = new.checks.get(check, (step, ABSENT))[1]
        if before != after:
            changes.append(CheckChange(check, step, before, after))
    return sorted(changes, key=lambda change: (change.step, change.check))


def _notes(old: Result | None, new: Result | None) -> list[str]:
    notes = []
    for side, result in (("old", old), ("new", new)):
        if result is not None and not result.graded:
            notes.append(f"{side}: {result.status}" + (f": {result.reason}" if result.reason else ""))
        elif result is not None and result.report_problem:
            notes.append(f"{side}: {result.report_problem}; the checks that changed are unknown")
    return notes


def compare_learner(learner: str, old: Result | None, new: Result | None) -> LearnerDiff:
    if old is None or new is None:
        change = ONLY_NEW if old is None else ONLY_OLD
        return LearnerDiff(learner, change, old, new, notes=_notes(old, new))
    if not (old.graded and new.graded):
        return LearnerDiff(learner, NOT_GRADED, old, new, notes=_notes(old, new))
    change = _ordered(old.earned or 0, old.possible or 0, new.earned or 0, new.possible or 0)
    checks = _check_changes(old, new) if old.checks_known and new.checks_known else []
    return LearnerDiff(learner, change, old, new, checks, _notes(old, new))


def _step_summary(learners: list[LearnerDiff]) -> dict[int, dict[str, Any]]:
    steps: dict[int, dict[str, Any]] = {}
    for row in learners:
        if row.old is None or row.new is None or not (row.old.checks_known and row.new.checks_known):
            continue
        for number in sorted(row.old.steps.keys() | row.new.steps.keys()):
            before, after = row.old.steps.get(number), row.new.steps.get(number)
            either = after or before
            title = either.title if either else ""
            entry = steps.setdefault(number, {"number": number, "title": title, GAINED: 0, LOST: 0, SAME: 0})
            kind = _ordered(before.earned if before else 0, before.points if before else 0,
                            after.earned if after else 0, after.points if after else 0)  # fmt: skip
            entry[kind] += 1
    return dict(sorted(steps.items()))


def compare_folders(old: Path, new: Path) -> Diff:
    """OLD's and NEW's learners compared, every learner of either folder in one row, by name."""
    before, after = read_results(old, REFUSED_FILE), read_results(new, REFUSED_FILE)
    learners = [
        compare_learner(name, before.get(name), after.get(name)) for name in sorted(before.keys() | after.keys())
    ]
    return Diff(str(old), str(new), learners, _step_summary(learners))


def _side(result: Result | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"status": result.status, "earned": result.earned, "possible": result.possible,
            "rubric": result.rubric, "lab": result.lab, "reason": result.reason}  # fmt: skip


def as_json(diff: Diff) -> dict[str, Any]:
    return {
        "old": diff.old_folder,
        "new": diff.new_folder,
        "summary": {"learners": diff.counts(), "steps": list(diff.steps.values())},
        "learners": [
            {
                "learner": row.learner,
                "change": row.change,
                "old": _side(row.old),
                "new": _side(row.new),
                "checks": [vars(change) for change in row.checks],
                "notes": row.notes,
            }
            for row in diff.learners
        ],
    }


CSV_HEADER = [
    "learner", "change", "old status", "new status", "old earned", "old possible", "new earned", "new possible",
    "old rubric", "new rubric", "checks changed", "changed checks", "note",
]  # fmt: skip


def _csv_row(row: LearnerDiff) -> list[object]:
    old, new = row.old, row.new
    changed = "; ".join(f"{c.check} (step {c.step}): {c.old} -> {c.new}" for c in row.checks)
    cells = [
        row.learner, row.change, old.status if old else "", new.status if new else "",
        old.earned if old else None, old.possible if old else None, new.earned if new else None,
        new.possible if new else None, (old.rubric or "") if old else "", (new.rubric or "") if new else "",
        len(row.checks), changed, " | ".join(row.notes),
    ]  # fmt: skip
    return [spreadsheet_safe("" if cell is None else cell) for cell in cells]


def write_csv(diff: Diff, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(CSV_HEADER)
        writer.writerows(_csv_row(row) for row in diff.learners)


def write_diff(old: Path, new: Path, out: Path) -> Diff:
    """``diff.csv`` and ``diff.json`` in ``out`` (made if missing)."""
    diff = compare_folders(old, new)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(diff, out / "diff.csv")
    write_atomically(out / "diff.json", as_json(diff))
    return diff
