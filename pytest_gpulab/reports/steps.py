"""Steps and their checks: the ``step`` and ``check`` markers, and how a step is scored.

A step is one module (or several) under ``pytest.mark.step(number, title,
points)``; each test function in it is one named check with a stable id such
as ``gpuop.5.pending-reason``. A step earns its points only when every check
passes, unless its checks carry points of their own (``pytest.mark.check(points=N)``),
in which case each check earns its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

DEFAULT_STEP_POINTS = 1
STEP_SIGNATURE = "step(number, title, points=1, *, needs=(), timeout=None)"
_CHECK_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*(\[.*\])?")


@dataclass(frozen=True)
class StepInfo:
    number: int
    title: str
    points: int | None  # None: the sum of its checks' points, else DEFAULT_STEP_POINTS
    needs: tuple[int, ...] = ()  # earlier steps whose results this one grades
    timeout: float | None = None  # seconds per check; None: the lab's check_timeout

    def as_dict(self) -> dict[str, object]:
        return {"step": self.number, "title": self.title, "points": self.points}


@dataclass(frozen=True)
class CheckInfo:
    id: str  # lab.step.name, stable across runs and reports
    name: str
    points: int | None = None


def _is_count(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _validate_step(
    number: int,
    title: str,
    points: int | None = None,
    *,
    needs: int | Iterable[int] = (),
    timeout: float | None = None,
) -> StepInfo:
    """The marker's signature; arguments checked like a function call."""
    if not _is_count(number, 1):
        raise ValueError(f"the step number must be a positive integer, got {number!r}")
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"the step title must be a non-empty string, got {title!r}")
    if points is not None and not _is_count(points, 0):
        raise ValueError(f"points must be a non-negative integer, got {points!r}")
    needed = (needs,) if isinstance(needs, int) else tuple(needs) if isinstance(needs, (list, tuple)) else None
    if needed is None or not all(_is_count(step, 1) and step < number for step in needed):
        raise ValueError(f"needs names earlier steps by number (e.g. needs=5 or needs=(1, 5)), got {needs!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"timeout is a positive number of seconds, got {timeout!r}")
    return StepInfo(number, title.strip(), points, tuple(sorted(set(needed))), timeout)


def _validate_check(name: str | None = None, *, points: int | None = None) -> tuple[str | None, int | None]:
    """The ``check`` marker's signature: an explicit check name and/or the check's own points."""
    if name is not None and (not isinstance(name, str) or not _CHECK_NAME.fullmatch(name)):
        raise ValueError(f"a check name is lower-case words joined by dashes (e.g. 'pending-reason'), got {name!r}")
    if points is not None and not _is_count(points, 0):
        raise ValueError(f"points must be a non-negative integer, got {points!r}")
    return name, points


def check_name_of(function_name: str) -> str:
    """``test_pending_reason`` -> ``pending-reason``; a parametrized ``[id]`` is kept."""
    base, bracket, params = function_name.partition("[")
    name = base.removeprefix("test_").removeprefix("test").strip("_").replace("_", "-").lower() or "check"
    return f"{name}{bracket}{params}"


def _usage_error(item: pytest.Item, marker: str, error: Exception, signature: str) -> pytest.UsageError:
    return pytest.UsageError(f"{item.nodeid}: invalid {marker} marker: {error}. Use {signature}.")


def step_of(item: pytest.Item) -> StepInfo:
    """The item's step; a missing or malformed marker is a usage error for the author."""
    marker = item.get_closest_marker("step")
    if marker is None:
        raise pytest.UsageError(
            f"{item.nodeid}: a grader needs a step marker, e.g. "
            '`pytestmark = pytest.mark.step(1, "Main containerd configuration", points=10)`.'
        )
    try:
        return _validate_step(*marker.args, **marker.kwargs)
    except (TypeError, ValueError) as error:
        raise _usage_error(item, "step", error, STEP_SIGNATURE) from None


def explicit_check(obj: object) -> tuple[str | None, int | None]:
    """The ``check`` marker's name and points on a test function, if it has one."""
    marks = [mark for mark in getattr(obj, "pytestmark", []) if getattr(mark, "name", None) == "check"]
    if not marks:
        return None, None
    return _validate_check(*marks[0].args, **marks[0].kwargs)


def check_of(item: pytest.Item, lab: str, step: StepInfo) -> CheckInfo:
    marker = item.get_closest_marker("check")
    try:
        name, points = _validate_check(*marker.args, **marker.kwargs) if marker else (None, None)
    except (TypeError, ValueError) as error:
        raise _usage_error(item, "check", error, "check(name=None, *, points=None)") from None
    if name is None:
        name = check_name_of(item.name)
    elif "[" in item.name and "[" not in name:
        name += item.name[item.name.index("[") :]
    return CheckInfo(f"{lab}.{step.number}.{name}", name, points)


def validate_points(checks: Iterable[tuple[StepInfo, CheckInfo]]) -> None:
    """A step's checks either all carry points or none does; the step's own points must agree."""
    by_step: dict[int, tuple[StepInfo, list[CheckInfo]]] = {}
    for step, check in checks:
        by_step.setdefault(step.number, (step, []))[1].append(check)
    for step, step_checks in by_step.values():
        carrying = [check for check in step_checks if check.points is not None]
        if carrying and len(carrying) != len(step_checks):
            bare = next(check.id for check in step_checks if check.points is None)
            raise pytest.UsageError(
                f"step {step.number}: some checks carry points and {bare} does not; give every check points, or none."
            )
        total = sum(check.points or 0 for check in carrying)
        if carrying and step.points is not None and step.points != total:
            raise pytest.UsageError(
                f"step {step.number} is marked points={step.points} but its checks' points add up to {total}; "
                "drop the step's points or make them agree."
            )


def validate_needs(steps: Iterable[StepInfo]) -> None:
    """A step needs steps the lab has."""
    known = list(steps)
    numbers = {step.number for step in known}
    for step in known:
        unknown = [number for number in step.needs if number not in numbers]
        if unknown:
            raise pytest.UsageError(
                f"step {step.number} needs step {', '.join(map(str, unknown))}, which the lab does not have; "
                f"its steps are {', '.join(map(str, sorted(numbers)))}."
            )
