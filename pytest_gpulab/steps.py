"""The ``step`` marker: which lab step a grader checks, its title and its points."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import pytest


@dataclass(frozen=True)
class StepInfo:
    number: int
    title: str
    points: int

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["step"] = data.pop("number")
        return data


def _validate_step(number: int, title: str, points: int = 1) -> StepInfo:
    """The marker's signature; arguments checked like a function call."""
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise ValueError(f"the step number must be a positive integer, got {number!r}")
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"the step title must be a non-empty string, got {title!r}")
    if not isinstance(points, int) or isinstance(points, bool) or points < 0:
        raise ValueError(f"points must be a non-negative integer, got {points!r}")
    return StepInfo(number, title.strip(), points)


def step_of(item: pytest.Item, *, strict: bool = True) -> StepInfo | None:
    """The item's step; with ``strict``, a missing or malformed marker is a usage error for the author."""
    marker = item.get_closest_marker("step")
    if marker is None:
        if strict:
            raise pytest.UsageError(
                f"{item.nodeid}: a grader needs a step marker, e.g. "
                "`pytestmark = pytest.mark.step(1, \"Main containerd configuration\", points=10)`."
            )
        return None
    try:
        return _validate_step(*marker.args, **marker.kwargs)
    except (TypeError, ValueError) as error:
        if strict:
            raise pytest.UsageError(f"{item.nodeid}: invalid step marker: {error}. Use step(number, title, points=1).") from None
        return None


@dataclass
class StepScore:
    """A step's result over its tests: earned only when every one of them passed."""

    step: StepInfo
    passed: bool = True
    nodeids: list[str] = field(default_factory=list)

    @property
    def earned(self) -> int:
        return self.step.points if self.passed else 0


def tally(results: Iterable[tuple[StepInfo, str, bool]]) -> list[StepScore]:
    """(step, nodeid, passed) of each test -> one score per step, by step number."""
    scores: dict[int, StepScore] = {}
    for step, nodeid, passed in results:
        score = scores.setdefault(step.number, StepScore(step))
        score.passed = score.passed and passed
        score.nodeids.append(nodeid)
    return [scores[number] for number in sorted(scores)]
