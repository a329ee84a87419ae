"""What a grading run found: each check's outcome, each step's outcome and score.

The plugin records one :class:`CheckRun` per collected check, and every report
(the terminal summary, the grading report, pytest-json-report's output,
Gradescope's results and JUnit's properties) is made from these records, so
they agree. The outcomes are:

- ``passed``;
- ``failed``: the learner's work is wrong;
- ``blocked``: the step needs what an earlier step makes, and it is missing;
- ``error``: the grader broke, the cluster did not answer, or a check ran out
  of time; an autograder may grade again rather than grade down;
- ``not graded``: left out of this run (``--step``), or not reached yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..grading.evidence import Evidence
from ..grading.feedback import GradingError, StepBlocked, StepFailed, listed, with_hint
from .steps import DEFAULT_STEP_POINTS, CheckInfo, StepInfo

PASSED, FAILED, BLOCKED, ERROR, NOT_GRADED = "passed", "failed", "blocked", "error", "not graded"
OUTCOMES = (PASSED, FAILED, BLOCKED, ERROR, NOT_GRADED)
DETAIL_LIMIT = 20_000  # characters of JSON per failure's detail
TIMEOUT_PREFIX = "Timeout (>"  # how pytest-timeout's failure begins


@dataclass
class CheckRun:
    step: StepInfo
    check: CheckInfo
    nodeid: str
    outcome: str = NOT_GRADED
    message: str | None = None  # the learner's sentence
    hint: str | None = None
    detail: Any = None  # the instructor's
    error: str | None = None  # what broke, for the author and the instructor
    blocked_by: tuple[int, ...] = ()
    duration: float = 0.0
    notes: list[str] = field(default_factory=list)
    evidence: Evidence | None = None  # what it read, recorded by the kits while it ran

    @property
    def learner_text(self) -> str | None:
        return with_hint(self.message, self.hint)


results_key = pytest.StashKey[dict[str, CheckRun]]()


def _timeout_message(run: CheckRun, error: BaseException) -> str:
    seconds = str(error)[len(TIMEOUT_PREFIX) :].split("s)", 1)[0]
    return (
        f"Grading this check took longer than its {seconds} seconds and was stopped. Grade again; "
        "if it happens again, tell the course staff."
    )


def classify(run: CheckRun, error: BaseException) -> None:
    """The outcome a check's first failure gives it."""
    if isinstance(error, StepBlocked):
        steps = (error.step,) if isinstance(error.step, int) else error.step
        run.outcome, run.blocked_by = BLOCKED, steps or run.step.needs
    elif isinstance(error, GradingError):
        run.outcome, run.error = ERROR, type(error).__name__
    elif isinstance(error, StepFailed):
        run.outcome = FAILED
    elif isinstance(error, pytest.fail.Exception) and str(error).startswith(TIMEOUT_PREFIX):
        run.outcome, run.message, run.error = ERROR, _timeout_message(run, error), str(error)
        return
    else:
        run.outcome, run.error = ERROR, f"{type(error).__name__}: {error}"
        run.message = "The grader itself failed on this check; this is not your mistake. Tell the course staff."
        return
    run.message, run.hint, run.detail = error.message, error.hint, json_safe(error.detail)


def record(run: CheckRun, report: pytest.TestReport, call: pytest.CallInfo[None], notes: list[str]) -> None:
    """Fold one phase's report into the check's record: its first failure decides."""
    run.duration += report.duration
    if report.when == "teardown":
        run.notes = notes
    if report.passed:
        if report.when == "call" and run.outcome == NOT_GRADED:
            run.outcome = PASSED
    elif report.skipped:
        run.message = run.message or _skip_reason(report)
    elif run.outcome in (NOT_GRADED, PASSED) and call.excinfo is not None:
        classify(run, call.excinfo.value)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)


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


@dataclass
class StepResult:
    """A step over its checks: its outcome, score, and the one sentence that says why."""

    step: StepInfo
    checks: list[CheckRun] = field(default_factory=list)
    outcome: str = NOT_GRADED
    message: str | None = None
    hint: str | None = None
    blocked_by: tuple[int, ...] = ()

    @property
    def own_points(self) -> bool:
        return any(run.check.points is not None for run in self.checks)

    @property
    def possible(self) -> int:
        if self.own_points:
            return sum(run.check.points or 0 for run in self.checks)
        return self.step.points if self.step.points is not None else DEFAULT_STEP_POINTS

    @property
    def earned(self) -> int:
        if self.outcome == PASSED:
            return self.possible
        if self.outcome == FAILED and self.own_points:
            return sum(run.check.points or 0 for run in self.checks if run.outcome == PASSED)
        return 0


def _step_outcome(checks: list[CheckRun]) -> str:
    """Any error, else any block, else any failure; passed only when every check passed."""
    outcomes = {run.outcome for run in checks}
    for outcome in (ERROR, BLOCKED, FAILED):
        if outcome in outcomes:
            return outcome
    if outcomes == {PASSED}:
        return PASSED
    return NOT_GRADED if outcomes == {NOT_GRADED} else FAILED


def _because(result: StepResult, earlier: dict[int, StepResult]) -> str:
    """Why a blocked step's need is missing: what became of the step that makes it."""
    reasons = []
    for number in result.blocked_by:
        before = earlier.get(number)
        if before is None or before.outcome == NOT_GRADED:
            reasons.append(
                f"step {number} was not graded in this run; grade it too (--step {number}-{result.step.number})"
            )
        elif before.outcome == PASSED:
            reasons.append(f"step {number} passed, but what it made is not there now; redo step {number}")
        else:
            reasons.append(f"step {number} {before.outcome}: {(before.message or '').rstrip('.')}")
    return listed(reasons)


def _silence_the_rest(result: StepResult) -> None:
    """In a blocked step, a check that failed says nothing of its own: it may be the block's echo."""
    for run in result.checks:
        if run.outcome == FAILED:
            run.detail = {"said_while_blocked": run.learner_text, "detail": run.detail}
            run.outcome, run.message, run.hint, run.blocked_by = BLOCKED, None, None, result.blocked_by


def step_results(config: pytest.Config) -> list[StepResult]:
    """Every collected step, in order, with its outcome and the first thing its learner should read."""
    by_number: dict[int, StepResult] = {}
    for run in config.stash.get(results_key, {}).values():
        by_number.setdefault(run.step.number, StepResult(run.step)).checks.append(run)
    done: dict[int, StepResult] = {}
    for number in sorted(by_number):
        result = by_number[number]
        result.outcome = _step_outcome(result.checks)
        first = next((run for run in result.checks if run.outcome == result.outcome and run.message), None)
        if first is not None and result.outcome != PASSED:
            result.message, result.hint, result.blocked_by = first.message, first.hint, first.blocked_by
        if result.outcome == BLOCKED:
            _silence_the_rest(result)
            needs = listed(f"step {n}" for n in result.blocked_by) or "an earlier step"
            result.message = f"Blocked by {needs}: {result.message} Because {_because(result, done)}."
            result.hint = None
        done[number] = result
    return [done[number] for number in sorted(done)]


def first_text(result: StepResult) -> str | None:
    return with_hint(result.message, result.hint)
