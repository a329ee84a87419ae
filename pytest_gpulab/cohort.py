"""The cohort report: every learner's grading in RESULTS/, in three forms.

``cohort.csv``: one row per learner (status, points, then each step's outcome);
``cohort.json``: the same, with each step's pass rate and its most frequent failing
checks and their learner messages; ``cohort.html``: the page an instructor reads
(``cohort_html.py``). A step's pass rate is over the learners who were graded on it;
a bundle refused or not graded is listed apart and counts in no rate. Usable
without pytest: ``write_reports(RESULTS)``, also ``gpulab cohort-report RESULTS``.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .regrade import GRADED
from .report_file import write_atomically

TOP_CHECKS, TOP_MESSAGES = 5, 3


@dataclass
class Learner:
    learner: str
    status: str
    reason: str | None
    earned: int | None
    possible: int | None
    steps: dict[int, str] = field(default_factory=dict)  # number: outcome
    failing: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # number: [(check id, message)]


@dataclass
class Step:
    number: int
    title: str
    points: int
    outcomes: Counter[str] = field(default_factory=Counter)
    failing: dict[str, Counter[str]] = field(default_factory=dict)  # check id: message counts

    @property
    def graded(self) -> int:
        return sum(count for outcome, count in self.outcomes.items() if outcome != "not graded")

    @property
    def pass_rate(self) -> float | None:
        return self.outcomes["passed"] / self.graded if self.graded else None

    def top_failing(self) -> list[dict[str, Any]]:
        ranked = sorted(self.failing.items(), key=lambda item: (-sum(item[1].values()), item[0]))[:TOP_CHECKS]
        return [
            {"check": check, "learners": sum(messages.values()),
             "messages": [{"message": text, "learners": n} for text, n in messages.most_common(TOP_MESSAGES)]}
            for check, messages in ranked
        ]  # fmt: skip


@dataclass
class Cohort:
    labs: list[str]
    rubrics: list[str]
    learners: list[Learner]
    steps: dict[int, Step]

    @property
    def graded(self) -> list[Learner]:
        return [learner for learner in self.learners if learner.status == GRADED]

    def score_distribution(self) -> list[dict[str, Any]]:
        """Learners by percent of the points, in tenths (the last holds 100 %)."""
        buckets = Counter(min(100 * (x.earned or 0) // max(x.possible or 1, 1) // 10, 10) for x in self.graded)
        return [{"bucket": f"{10 * b}-{10 * b + 9}%" if b < 10 else "100%", "learners": buckets[b]} for b in range(11)]


def _learner_text(check: dict[str, Any]) -> str:
    message = check.get("message") or ""
    return f"{message} Hint: {check['hint']}" if check.get("hint") else message


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
    return Cohort(sorted(labs), sorted(rubrics), learners, dict(sorted(steps.items())))


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
    }


def write_csv(cohort: Cohort, path: Path) -> None:
    numbers = list(cohort.steps)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["learner", "status", "earned", "possible", *(f"step {n}" for n in numbers), "reason"])
        for x in cohort.learners:
            cells = [x.steps.get(n, "") for n in numbers]
            writer.writerow([x.learner, x.status, x.earned, x.possible, *cells, x.reason or ""])


def write_reports(results: Path) -> Cohort:
    """``cohort.csv``, ``cohort.json`` and ``cohort.html`` in ``results``."""
    from .cohort_html import page

    cohort = collect(results)
    write_csv(cohort, results / "cohort.csv")
    write_atomically(results / "cohort.json", as_json(cohort))
    (results / "cohort.html").write_text(page(cohort), encoding="utf-8")
    return cohort
