"""The grading report: one JSON document, rewritten atomically after every check, finished at the end.

A run killed outright leaves the last document written, marked ``"complete": false``,
with every check graded so far. The schema is versioned (``schema_version``); the
docs/instructors.md documents it with an example.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .evidence import bounded
from .reporting import ERROR, NOT_GRADED, PASSED, CheckRun, StepResult, classify

SCHEMA = "pytest-gpulab/report"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunInfo:
    """What a report says about the run as a whole."""

    lab: str | None
    lab_title: str | None
    rubric_version: str | None
    seed: int
    started_at: float
    steps_chosen: str | None = None  # --step as given; None: all
    sandbox: str | None = None  # how learner scripts were confined


def _check(run: CheckRun) -> dict[str, Any]:
    return {
        "id": run.check.id,
        "name": run.check.name,
        "outcome": run.outcome,
        "points": run.check.points,
        "message": run.message,
        "hint": run.hint,
        "blocked_by": list(run.blocked_by),
        "detail": run.detail,
        "error": run.error,
        "notes": run.notes,
        "evidence": run.evidence.as_json() if run.evidence is not None else [],
        "duration": round(run.duration, 3),
        "nodeid": run.nodeid,
    }


def _step(result: StepResult) -> dict[str, Any]:
    return {
        "number": result.step.number,
        "title": result.step.title,
        "outcome": result.outcome,
        "earned": result.earned,
        "points": result.possible,
        "message": result.message,
        "hint": result.hint,
        "blocked_by": list(result.blocked_by),
        "needs": list(result.step.needs),
        "checks": [_check(run) for run in result.checks],
    }


def document(
    info: RunInfo, results: list[StepResult], *, complete: bool, interrupted: str | None = None
) -> dict[str, Any]:
    """The report as JSON data; ``possible`` counts every step, ``possible_graded`` the steps graded."""
    graded = [result for result in results if result.outcome != NOT_GRADED]
    return bounded(
        {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "complete": complete,
            "interrupted": interrupted,
            "lab": info.lab,
            "lab_title": info.lab_title,
            "rubric_version": info.rubric_version,
            "seed": info.seed,
            "steps_chosen": info.steps_chosen,
            "sandbox": info.sandbox,
            "started_at": _iso(info.started_at),
            "written_at": _iso(time.time()),
            "earned": sum(result.earned for result in graded),
            "possible": sum(result.possible for result in results),
            "possible_graded": sum(result.possible for result in graded),
            "retry": any(result.outcome == ERROR for result in results),
            "steps": [_step(result) for result in results],
        }
    )


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def write_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file beside ``path``, then rename: a reader sees the old report or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(data, stream, indent=1)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def test_metadata(run: CheckRun, lab: str, call: Any, notes: list[str]) -> dict[str, Any]:
    """pytest-json-report's metadata of one check: lab, step, id, points, and what this phase found."""
    metadata: dict[str, Any] = {"lab": lab, **run.step.as_dict(), "check": run.check.id}
    if run.check.points is not None:
        metadata["check_points"] = run.check.points
    if notes:
        metadata["notes"] = notes
    if call.when == "call" and call.excinfo is None:
        metadata["outcome"] = PASSED
    if (
        call.excinfo is not None
        and call.when in ("setup", "call")
        and not call.excinfo.errisinstance(pytest.skip.Exception)
    ):
        phase = CheckRun(run.step, run.check, run.nodeid)
        classify(phase, call.excinfo.value)
        metadata.update(
            outcome=phase.outcome,
            feedback=phase.message,
            hint=phase.hint,
            detail=phase.detail,
            internal_error=phase.outcome == ERROR,
        )
        if phase.error:
            metadata["error"] = phase.error
    return metadata
