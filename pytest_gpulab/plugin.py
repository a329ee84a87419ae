"""pytest hooks of pytest-gpulab; the fixtures live in :mod:`pytest_gpulab.fixtures`.

``pytest --lab gpuop`` collects the lab's graders (one module per step). A
wrong answer is reported as the grader's sentence, without a traceback; the
instructor's detail goes to the JSON report's ``metadata`` of that test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from . import settings as settings_mod
from .feedback import StepFailed
from .fixtures import (  # noqa: F401  (the plugin module registers the fixtures)
    fake_containerd,
    feedback,
    gpulab_settings,
    lab,
    lab_cluster,
    lab_root,
    learner_script,
    live,
    settings_key,
)
from .steps import StepInfo, step_of

# -- options and collection ------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    settings_mod.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """With a lab chosen and no paths given, collect that lab's graders."""
    chosen = settings_mod.lab_from(early_config, namespace=early_config.known_args_namespace)
    if chosen is None or getattr(early_config.known_args_namespace, "file_or_dir", None):
        return
    args.append(str(chosen.graders))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "step(number, title, points=1): the lab step a grader test checks, its title and its points.",
    )
    config.stash[settings_key] = settings_mod.resolve(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    run = config.stash[settings_key]
    if run.lab is None:
        return []
    cluster = "a fresh ephemeral lab cluster" if run.lab_cluster == "ephemeral" else (run.kubeconfig or "~/.kube/config")
    return [f"gpulab: lab {run.lab.name}, learner root {run.lab_root}, cluster {cluster}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Say now, to the author, when a grader lacks a valid step marker."""
    run = config.stash[settings_key]
    graders = Path(str(run.lab.graders)).resolve() if run.lab else None
    for item in items:
        if item.get_closest_marker("step") or (graders and graders in Path(item.path).resolve().parents):
            step_of(item)


# -- results -------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    report.gpulab_step = step_of(item, strict=False)
    if call.excinfo is not None and isinstance(call.excinfo.value, StepFailed):
        report.longrepr = call.excinfo.value.learner_text()
    return report


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
    """Each grader test carries its lab, step, title and points; a failure its feedback and detail."""
    step = step_of(item, strict=False)
    if step is None:
        return {}
    run = item.config.stash[settings_key]
    metadata: dict[str, Any] = {"lab": run.lab.name if run.lab else None, **step.as_dict()}
    notes = [note for key, note in item.user_properties if key == "gpulab_note"]
    if notes:
        metadata["notes"] = list(notes)
    if call.excinfo is not None:
        error = call.excinfo.value
        if isinstance(error, StepFailed):
            metadata.update(feedback=error.message, hint=error.hint, detail=_json_safe(error.detail), internal_error=False)
        elif not isinstance(error, (pytest.skip.Exception,)):
            metadata.update(feedback=None, internal_error=True, error=f"{type(error).__name__}: {error}")
    return metadata


@pytest.hookimpl(optionalhook=True)
def pytest_json_modifyreport(json_report: dict[str, Any]) -> None:
    """A per-step summary for autograders: points earned out of points possible."""
    steps = []
    for test in json_report.get("tests", []):
        metadata = test.get("metadata") or {}
        if "step" not in metadata:
            continue
        passed = test.get("outcome") == "passed"
        steps.append({
            "nodeid": test["nodeid"], "step": metadata["step"], "title": metadata["title"],
            "points": metadata["points"], "earned": metadata["points"] if passed else 0, "outcome": test.get("outcome"),
        })
    if steps:
        json_report["gpulab"] = {
            "lab": next((t["metadata"]["lab"] for t in json_report["tests"] if "step" in (t.get("metadata") or {})), None),
            "earned": sum(s["earned"] for s in steps),
            "possible": sum(s["points"] for s in steps),
            "steps": sorted(steps, key=lambda s: s["step"]),
        }


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash[settings_key]
    if run.lab is None:
        return
    rows: list[tuple[StepInfo, str]] = []
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            step = getattr(report, "gpulab_step", None)
            if step is not None and report.when in ("setup", "call") and (outcome != "passed" or report.when == "call"):
                rows.append((step, outcome))
    if not rows:
        return
    best: dict[int, tuple[StepInfo, str]] = {}
    for step, outcome in rows:
        if step.number not in best or best[step.number][1] == "passed":
            best[step.number] = (step, outcome)
    terminalreporter.section(f"lab {run.lab.name}")
    earned = possible = 0
    for number in sorted(best):
        step, outcome = best[number]
        possible += step.points
        earned += step.points if outcome == "passed" else 0
        mark = "PASS" if outcome == "passed" else "FAIL"
        terminalreporter.write_line(f"step {number}: {mark}  {step.title} ({step.points if outcome == 'passed' else 0}/{step.points})")
    terminalreporter.write_line(f"total: {earned}/{possible} points")
    notes = [(report.nodeid, note) for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
             for key, note in report.user_properties if key == "gpulab_note"]
    for nodeid, note in notes:
        terminalreporter.write_line(f"note ({nodeid.rsplit('/', 1)[-1]}): {note}")
