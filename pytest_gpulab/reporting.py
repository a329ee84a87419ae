"""What a grading run reports: each check's result, each step's score, for people and for autograders.

The plugin records one :class:`CheckRun` per collected check. The terminal
summary and the JSON report (pytest-json-report's ``metadata`` per test and a
top-level ``gpulab`` object) are both made from these records, so they agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from .feedback import StepFailed
from .settings import RunSettings
from .steps import CheckInfo, StepInfo, StepScore, tally

DETAIL_LIMIT = 20_000  # characters of JSON per failure's detail
SUMMARY_MESSAGE_LIMIT = 200


@dataclass
class CheckRun:
    step: StepInfo
    check: CheckInfo
    passed: bool | None = None  # None until the test's call phase (or a failure) says; never run: None
    message: str | None = None  # the learner's sentence (and hint) of the first failure
    notes: list[str] = field(default_factory=list)


results_key = pytest.StashKey[dict[str, CheckRun]]()


def record(run: CheckRun, report: pytest.TestReport, call: pytest.CallInfo[None], notes: list[str]) -> None:
    """Fold one phase's report into the check's record."""
    if not report.passed:
        run.passed = False
        if run.message is None and call.excinfo is not None:
            error = call.excinfo.value
            run.message = (
                error.learner_text()
                if isinstance(error, StepFailed)
                else f"the grader failed: {type(error).__name__}: {error}"
            )
    elif report.when == "call" and run.passed is None:
        run.passed = True
    if report.when == "teardown":
        run.notes = notes


def scores(config: pytest.Config) -> list[StepScore]:
    """Every collected step, earned only when its checks ran and passed."""
    runs = config.stash.get(results_key, {})
    return tally((run.step, run.check, nodeid, run.passed is True) for nodeid, run in runs.items())


def _plain(value: Any, depth: int = 0) -> Any:
    """JSON-shaped data: string keys, lists for sequences, text for anything else; bounded depth."""
    if depth > 40:
        return "..."
    if isinstance(value, dict):
        return {str(key): _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(item, depth + 1) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def json_safe(value: Any) -> Any:
    """The instructor's detail as JSON, never an error: a report must always be written."""
    try:
        text = json.dumps(_plain(value))
    except (TypeError, ValueError, RecursionError) as error:
        return f"(detail could not be recorded: {error})"
    return json.loads(text) if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT] + " ...(cut)"


def test_metadata(
    run: CheckRun, settings: RunSettings, call: pytest.CallInfo[None], notes: list[str]
) -> dict[str, Any]:
    """A check's lab, step, title, points and check id; a failure's feedback and detail."""
    metadata: dict[str, Any] = {
        "lab": settings.lab.name if settings.lab else None,
        **run.step.as_dict(),
        "check": run.check.id,
    }
    if run.check.points is not None:
        metadata["check_points"] = run.check.points
    if notes:
        metadata["notes"] = notes
    if call.excinfo is not None and call.when in ("setup", "call"):
        error = call.excinfo.value
        if isinstance(error, StepFailed):
            metadata.update(
                feedback=error.message, hint=error.hint, detail=json_safe(error.detail), internal_error=False
            )
        elif not isinstance(error, pytest.skip.Exception):
            metadata.update(feedback=None, internal_error=True, error=f"{type(error).__name__}: {error}")
    return metadata


def _step_summary(score: StepScore, runs: dict[str, CheckRun]) -> dict[str, Any]:
    checks = [
        {"id": check.id, "passed": passed, **({"points": check.points} if check.points is not None else {})}
        for check, passed in score.checks
    ]
    return {
        **score.step.as_dict(),
        "points": score.possible,
        "earned": score.earned,
        "passed": score.passed,
        "checks": checks,
        "nodeids": score.nodeids,
    }


def run_summary(config: pytest.Config, settings: RunSettings) -> dict[str, Any] | None:
    """The top-level ``gpulab`` object: the lab, the rubric and every step's points."""
    steps = scores(config)
    if not steps:
        return None
    runs = config.stash.get(results_key, {})
    return {
        "lab": settings.lab.name if settings.lab else None,
        "rubric_version": settings.lab.rubric_version if settings.lab else None,
        "seed": settings.seed,
        "earned": sum(score.earned for score in steps),
        "possible": sum(score.possible for score in steps),
        "steps": [_step_summary(score, runs) for score in steps],
    }


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_MESSAGE_LIMIT else line[: SUMMARY_MESSAGE_LIMIT - 3] + "..."


def terminal_lines(config: pytest.Config, settings: RunSettings) -> list[str]:
    """Each step with its points, the failing checks under it, the total, then the notes."""
    runs = config.stash.get(results_key, {})
    lines: list[str] = []
    steps = scores(config)
    for score in steps:
        mark = "PASS" if score.passed else "FAIL"
        lines.append(f"step {score.step.number}: {mark}  {score.step.title} ({score.earned}/{score.possible})")
        lines += [
            f"    {', '.join(ids)}: {_short(message)}" for message, ids in _failing_by_message(score, runs).items()
        ]
    lines.append(f"total: {sum(s.earned for s in steps)}/{sum(s.possible for s in steps)} points")
    notes = dict.fromkeys(f"note on step {run.step.number}: {note}" for run in runs.values() for note in run.notes)
    return lines + list(notes)


def _failing_by_message(score: StepScore, runs: dict[str, CheckRun]) -> dict[str, list[str]]:
    """A step's failing checks grouped by what they said, so one cause reads once."""
    grouped: dict[str, list[str]] = {}
    for nodeid in score.nodeids:
        run = runs[nodeid]
        if run.passed is not True:
            grouped.setdefault(run.message or "not graded", []).append(run.check.id)
    return grouped
