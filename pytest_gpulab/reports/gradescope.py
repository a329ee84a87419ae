"""Gradescope's autograder ``results.json``: one test per check, numbered ``step.check`` ("5.2").

A step that scores all or nothing shares its points among its checks, each
earning its share only when the whole step passes, so the tests add up to the
step. The outcome (passed, failed, blocked, error, not graded) is each test's
tag and ``extra_data``; ``status`` is Gradescope's passed or failed.
"""

from __future__ import annotations

from typing import Any

from ..grading.feedback import with_hint
from .reporting import ERROR, NOT_GRADED, PASSED, CheckRun, StepResult

VISIBILITY = "visible"


def _share(result: StepResult, run: CheckRun) -> tuple[float, float]:
    """(score, max_score) of one check."""
    if result.own_points:
        points = float(run.check.points or 0)
        return (points if result.outcome in (PASSED, "failed") and run.outcome == PASSED else 0.0), points
    share = result.possible / len(result.checks)
    return (share if result.outcome == PASSED else 0.0), share


def _output(result: StepResult, run: CheckRun) -> str:
    if run.outcome == PASSED:
        return "" if result.outcome == PASSED else "This check passed; the step scores when all its checks pass."
    if run.outcome == NOT_GRADED:
        return "Not graded in this run."
    own = with_hint(run.message, run.hint)
    return own or result.message or ""


def _test(result: StepResult, index: int, run: CheckRun) -> dict[str, Any]:
    score, max_score = _share(result, run)
    return {
        "name": f"Step {result.step.number}: {result.step.title} · {run.check.name}",
        "number": f"{result.step.number}.{index}",
        "score": round(score, 4),
        "max_score": round(max_score, 4),
        "status": "passed" if run.outcome == PASSED else "failed",
        "output": _output(result, run),
        "tags": [run.outcome],
        "visibility": VISIBILITY,
        "extra_data": {"check": run.check.id, "outcome": run.outcome, "step_outcome": result.outcome},
    }


def results(step_results: list[StepResult], execution_time: float, lab: str, rubric: str) -> dict[str, Any]:
    earned = sum(result.earned for result in step_results)
    possible = sum(result.possible for result in step_results)
    errors = [result.step.number for result in step_results if result.outcome == ERROR]
    output = f"Lab {lab} (rubric {rubric}): {earned}/{possible} points."
    if errors:
        output += f" Grading broke on step {', '.join(map(str, errors))}; this run should be graded again."
    return {
        "score": float(earned),
        "execution_time": round(execution_time, 3),
        "output": output,
        "visibility": VISIBILITY,
        "stdout_visibility": "hidden",
        "tests": [
            _test(result, index, run) for result in step_results for index, run in enumerate(result.checks, start=1)
        ],
    }
