"""The cohort report: every learner's grading in RESULTS/, in three forms.

``cohort.csv``: one row per learner (status, points, then each step's outcome);
``cohort.json``: the same, with each step's pass rate and its most frequent failing
checks and their learner messages; ``cohort.html``: the page an instructor reads
(``cohort_html.py``), each graded learner's row linking to ``LEARNER/evidence.html``, what each of their
checks read. A step's pass rate is over the learners who were graded on it;
a bundle refused or not graded is listed apart and counts in no rate. Usable
without pytest: ``write_reports(RESULTS)``, also ``gpulab cohort-report RESULTS``.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..grading.feedback import with_hint
from ..reports.explain import explain_html
from ..reports.report_file import write_atomically
from .diff import DIFF_FOLDER, write_diff
from .diff_page import diff_section
from .model import REFUSED_FILE, Cohort, Learner, Step
from .page import EVIDENCE_PAGE, page
from .regrade import GRADED
from .results import spreadsheet_safe


def _learner_text(check: dict[str, Any]) -> str:
    return with_hint(check.get("message") or "", check.get("hint")) or ""


def _add_graded(learner: Learner, report: dict[str, Any], steps: dict[int, Step]) -> None:
    for entry in report.get("steps", []):
        number = int(entry["number"])
        step = steps.setdefault(number, Step(number, entry.get("title", ""), int(entry.get("points", 0))))
        learner.steps[number] = entry["outcome"]
        step.outcomes[entry["outcome"]] += 1
        for check in entry.get("checks", []):
            if check.get("outcome") == "failed":
                learner.failing.setdefault(number, []).append((check["id"], _learner_text(check)))
                step.failing.setdefault(check["id"], Counter())[_learner_text(check)] += 1


def write_evidence(results: Path, cohort: Cohort) -> None:
    """Each graded learner's page of every check's evidence, beside their report (the cohort page links to it);
    a folder that refuses it goes without."""
    for learner in cohort.graded:
        folder = results / learner.learner
        try:
            report = _read_json(folder / "report.json")
            (folder / EVIDENCE_PAGE).write_text(explain_html(report, learner.learner), encoding="utf-8")
        except OSError:
            continue


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def collect(results: Path) -> Cohort:
    """Every ``RESULTS/<learner>/outcome.json`` (and the report of each graded one)."""
    learners: list[Learner] = []
    steps: dict[int, Step] = {}
    labs, rubrics = Counter[str](), Counter[str]()
    for outcome_file in sorted(results.glob("*/outcome.json")):
        outcome = _read_json(outcome_file)
        if not outcome:
            continue
        learner = Learner(outcome_file.parent.name, outcome.get("status", "error"), outcome.get("reason"),
                          outcome.get("earned"), outcome.get("possible"))  # fmt: skip
        if learner.status == GRADED:
            _add_graded(learner, _read_json(outcome_file.parent / "report.json"), steps)
            labs[outcome.get("lab") or "?"] += 1
            rubrics[str(outcome.get("rubric_graded"))] += 1
        learners.append(learner)
    refused = _read_json(results / REFUSED_FILE).get("refused")
    named = [entry for entry in refused or [] if isinstance(entry, dict)]
    return Cohort(sorted(labs), sorted(rubrics), learners, dict(sorted(steps.items())), named)


def as_json(cohort: Cohort) -> dict[str, Any]:
    return {
        "labs": cohort.labs,
        "rubrics": cohort.rubrics,
        "learners": len(cohort.learners),
        "graded": len(cohort.graded),
        "score_distribution": cohort.score_distribution(),
        "steps": [
            {
                "number": s.number,
                "title": s.title,
                "points": s.points,
                "graded": s.graded,
                "pass_rate": s.pass_rate,
                "outcomes": dict(s.outcomes),
                "most_failed_checks": s.top_failing(),
            }
            for s in cohort.steps.values()
        ],
        "rows": [asdict(learner) for learner in cohort.learners],
        "refused_bundles": cohort.refused,
    }


def write_csv(cohort: Cohort, path: Path) -> None:
    numbers = list(cohort.steps)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["learner", "status", "earned", "possible", *(f"step {n}" for n in numbers), "reason"])
        for x in cohort.learners:
            cells = [x.steps.get(n, "") for n in numbers]
            row = [x.learner, x.status, x.earned, x.possible, *cells, x.reason or ""]
            writer.writerow([spreadsheet_safe(cell) for cell in row])


def write_reports(results: Path, compare: Path | None = None) -> Cohort:
    """``cohort.csv``, ``cohort.json`` and ``cohort.html`` in ``results``; with ``compare`` (an older results folder
    of the same bundles), the regrade diff too: ``cohort.diff/diff.csv`` and ``diff.json``, and a section of the page."""
    cohort = collect(results)
    write_csv(cohort, results / "cohort.csv")
    write_atomically(results / "cohort.json", as_json(cohort))
    write_evidence(results, cohort)
    sections = diff_section(write_diff(compare, results, results / DIFF_FOLDER)) if compare is not None else ""
    (results / "cohort.html").write_text(page(cohort, sections), encoding="utf-8")
    return cohort
