"""pytest hooks of pytest-gpulab; the fixtures live in :mod:`pytest_gpulab.fixtures`.

``pytest --lab gpuop`` collects the lab's graders (one module per step). A
wrong answer is reported as the grader's sentence, without a traceback; the
instructor's detail goes to the JSON report's ``metadata`` of that test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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
from .steps import StepInfo, step_of, tally

# -- options and collection ------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    settings_mod.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """With a lab chosen and no paths given, collect that lab's graders; keep out of the learner's directory."""
    namespace = early_config.known_args_namespace
    chosen = settings_mod.lab_from(early_config, namespace=namespace)
    if chosen is None:
        return
    _stay_out_of(settings_mod.lab_root_from(early_config, chosen, namespace=namespace).resolve(), early_config)
    if not getattr(namespace, "file_or_dir", None):
        graders = str(chosen.graders)
        args.append(graders)
        # pytest imports the initial conftests from these paths, else from the current directory
        # (often the learner's): only the graders' own conftest files are ever imported.
        namespace.file_or_dir = [graders]
        namespace.confcutdir = str(Path(graders).parent)


def _within(path: Path | None, directory: Path) -> bool:
    return path is not None and (path.resolve() == directory or directory in path.resolve().parents)


def _stay_out_of(learner_root: Path, early_config: pytest.Config) -> None:
    """pytest picks its rootdir and ini file before plugins load, so a run started in the learner's
    directory (or `--lab-root PATH` read as a path) may point them there. Settings never come from
    the learner, and the cache is not written there."""
    if _within(early_config.inipath, learner_root):
        raise pytest.UsageError(
            f"pytest would take its settings from {early_config.inipath}, inside the learner's directory "
            f"{learner_root}; grading never does. Run the grader from another directory, or pass --rootdir "
            "and -c naming a directory and settings file of your own."
        )
    if _within(early_config.rootpath, learner_root):
        # As `-p no:cacheprovider` does: the cache would be written into the learner's directory.
        for name in ("cacheprovider", "stepwise"):
            if early_config.pluginmanager.has_plugin(name):
                early_config.pluginmanager.unregister(name=name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "step(number, title, points=1): the lab step a grader test checks, its title and its points.",
    )
    config.stash[settings_key] = settings_mod.resolve(config)
    config.pluginmanager.register(JsonSummary(config), "gpulab-json-summary")


def pytest_report_header(config: pytest.Config) -> list[str]:
    run = config.stash[settings_key]
    if run.lab is None:
        return []
    cluster = (
        "a fresh ephemeral lab cluster" if run.lab_cluster == "ephemeral"
        else settings_mod.effective_kubeconfig(run.kubeconfig, run.lab) or "~/.kube/config"
    )
    return [f"gpulab: lab {run.lab.name}, learner root {run.lab_root}, cluster {cluster}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every grader's step marker now (an author error), and count every step as possible."""
    run = config.stash[settings_key]
    graders = Path(str(run.lab.graders)).resolve() if run.lab else None
    results = config.stash.setdefault(results_key, {})
    for item in items:
        if item.get_closest_marker("step") or (graders and graders in Path(item.path).resolve().parents):
            results[item.nodeid] = StepRun(step_of(item))


# -- results -------------------------------------------------------------------------


@dataclass
class StepRun:
    step: StepInfo
    passed: bool | None = None  # None until the test's call phase (or a failure) says; never run: None
    notes: list[str] = field(default_factory=list)


results_key = pytest.StashKey[dict[str, StepRun]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """A wrong answer reads as the grader's sentence; each step's result is kept for the summaries."""
    report: pytest.TestReport = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, StepFailed):
        report.longrepr = call.excinfo.value.learner_text()
    run = item.config.stash.get(results_key, {}).get(item.nodeid)
    if run is not None:
        if not report.passed:
            run.passed = False
        elif report.when == "call" and run.passed is None:
            run.passed = True
        if report.when == "teardown":
            run.notes = notes_of(item)
    return report


def notes_of(item: pytest.Item) -> list[str]:
    return [note for key, note in item.user_properties if key == "gpulab_note"]


DETAIL_LIMIT = 20_000  # characters of JSON per failure's detail


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


def _json_safe(value: Any) -> Any:
    """The instructor's detail as JSON, never an error: a report must always be written."""
    try:
        text = json.dumps(_plain(value))
    except (TypeError, ValueError, RecursionError) as error:
        return f"(detail could not be recorded: {error})"
    return json.loads(text) if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT] + " ...(cut)"


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
    """Each grader test carries its lab, step, title and points; a failure its feedback and detail."""
    run = item.config.stash.get(results_key, {}).get(item.nodeid)
    if run is None:
        return {}
    run_settings = item.config.stash[settings_key]
    metadata: dict[str, Any] = {"lab": run_settings.lab.name if run_settings.lab else None, **run.step.as_dict()}
    notes = notes_of(item)
    if notes:
        metadata["notes"] = notes
    if call.excinfo is not None and call.when in ("setup", "call"):
        error = call.excinfo.value
        if isinstance(error, StepFailed):
            metadata.update(feedback=error.message, hint=error.hint, detail=_json_safe(error.detail), internal_error=False)
        elif not isinstance(error, pytest.skip.Exception):
            metadata.update(feedback=None, internal_error=True, error=f"{type(error).__name__}: {error}")
    return metadata


def _scores(config: pytest.Config) -> list:
    """Every collected step, earned only when all its tests ran and passed."""
    return tally((run.step, nodeid, run.passed is True) for nodeid, run in config.stash.get(results_key, {}).items())


class JsonSummary:
    """pytest-json-report's hook, bound to this run's config: the per-step totals for autograders."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        scores = _scores(self.config)
        run_settings = self.config.stash[settings_key]
        if not scores:
            return
        json_report["gpulab"] = {
            "lab": run_settings.lab.name if run_settings.lab else None,
            "earned": sum(score.earned for score in scores),
            "possible": sum(score.step.points for score in scores),
            "steps": [
                {**score.step.as_dict(), "earned": score.earned, "passed": score.passed, "nodeids": score.nodeids}
                for score in scores
            ],
        }


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run_settings = config.stash[settings_key]
    scores = _scores(config)
    if not scores or run_settings.lab is None:
        return
    terminalreporter.section(f"lab {run_settings.lab.name}")
    for score in scores:
        mark = "PASS" if score.passed else "FAIL"
        terminalreporter.write_line(f"step {score.step.number}: {mark}  {score.step.title} ({score.earned}/{score.step.points})")
    terminalreporter.write_line(f"total: {sum(s.earned for s in scores)}/{sum(s.step.points for s in scores)} points")
    for run in config.stash.get(results_key, {}).values():
        for note in run.notes:
            terminalreporter.write_line(f"note on step {run.step.number}: {note}")
