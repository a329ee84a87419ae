"""The cohort as data: each learner's outcome and each step's pass rate and most frequent failing checks,
read by the cohort report's writers (``cohort.py``) and its page (``cohort_html.py``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .regrade import GRADED

TOP_CHECKS, TOP_MESSAGES = 5, 3
REFUSED_FILE = "cohort.refused.json"  # the bundles a batch refused by their name, with why


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
    refused: list[dict[str, str]] = field(default_factory=list)  # bundles refused by their name: bundle, reason

    @property
    def graded(self) -> list[Learner]:
        return [learner for learner in self.learners if learner.status == GRADED]

    def score_distribution(self) -> list[dict[str, Any]]:
        """Learners by percent of the points, in tenths (the last holds 100 %)."""
        buckets = Counter(min(100 * (x.earned or 0) // max(x.possible or 1, 1) // 10, 10) for x in self.graded)
        return [{"bucket": f"{10 * b}-{10 * b + 9}%" if b < 10 else "100%", "learners": buckets[b]} for b in range(11)]
