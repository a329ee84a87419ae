"""pytest hooks of pytest-gpulab; the fixtures live in :mod:`pytest_gpulab.fixtures`.

``pytest --lab gpuop`` collects the lab's folder: one module per step, one
test function per named check. A wrong answer is reported as the grader's
sentence, without a traceback; the instructor's detail goes to the JSON
report's ``metadata`` of that check.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from . import settings as settings_mod
from .budget import GradingBudget
from .collect import LabFolder, StepModule, is_lab_folder, lab_name_of
from .fixtures import (  # noqa: F401  (the plugin module registers the fixtures)
    contract_runs_ahead,
    fake_containerd,
    feedback,
    gpulab_settings,
    lab,
    lab_cluster,
    lab_random,
    lab_root,
    learner,
    learner_script,
    live,
    near_miss_cluster,
    script_runner,
    settings_key,
    step_random,
)
from .grading.feedback import StepBlocked, StepFailed, listed
from .grading.live import warm_up
from .guard import stay_out_of
from .labs.labfile import Lab, load_lab
from .options import add_options
from .recorder import Recorder
from .reports import reporting
from .reports.report_file import test_metadata
from .reports.reporting import BLOCKED, ERROR, FAILED, CheckRun, results_key
from .reports.steps import STEP_SIGNATURE, check_of, step_of, validate_needs, validate_points
from .sandbox import confine as sandbox
from .session import GradingReports
from .watch.grading import CHILD as WATCH_CHILD

probing_key = pytest.StashKey[threading.Thread]()

early_lab_key = pytest.StashKey[tuple[Lab | None, settings_mod.Found | None]]()

# -- options, settings and what is collected -----------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    parser.getgroup("gpulab").addoption(
        "--watch",
        action="store_true",
        dest="gpulab_watch",
        help="Grade the lab, then again after every change to its files or cluster, as a live table (gpulab watch).",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--watch``: the watch runs instead of one grading (each of its gradings is a `pytest --lab` of its own)."""
    if not config.getoption("gpulab_watch", False) or os.environ.get(WATCH_CHILD):
        return None
    from .cli_watch import watch_from_pytest

    return watch_from_pytest(config, config.stash.get(early_lab_key, (None, None))[0])


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """With a lab chosen and no paths given, collect that lab's folder; take nothing from the learner's directory."""
    namespace = early_config.known_args_namespace
    chosen, found = settings_mod.lab_from(early_config, namespace=namespace)
    early_config.stash[early_lab_key] = (chosen, found)
    if chosen is None:
        return
    gc.freeze()  # pytest and the plugin are imported for good: the collector need not go through them again
    learner_root, _ = settings_mod.lab_root_from(early_config, chosen, namespace=namespace)
    stay_out_of(chosen.learner_root(learner_root).resolve(), early_config)
    if not namespace.file_or_dir:
        args.append(str(chosen.folder))  # documented: this hook may add to the command line's arguments


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{STEP_SIGNATURE}: the lab step a module's checks grade, its title and points, the earlier steps it needs, its seconds per check.",
    )
    config.addinivalue_line(
        "markers",
        "check(name=None, *, points=None): a check's stable name, and its own points if the step splits them.",
    )
    # urllib3, imported with the kubernetes client as collection ends (live.warm_up), warns that its optional
    # SOCKS support is missing: no learner's concern.
    config.addinivalue_line("filterwarnings", "ignore:SOCKS support in urllib3 requires:Warning")
    config.stash[settings_key] = settings_mod.resolve(config, config.stash.get(early_lab_key, None))
    config.pluginmanager.register(GradingReports(config), "gpulab-reports")
    config.pluginmanager.register(Recorder(config), "gpulab-evidence")
    if config.stash[settings_key].lab is not None:
        config.pluginmanager.register(GradingBudget(config, config.stash[settings_key].grading_budget), "gpulab-budget")


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[settings_key]
    if settings.lab is None:
        return []
    return [*settings.header(), f"gpulab: sandbox: {sandbox.probe().describe()}"]


def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A folder with a lab.toml is a lab, wherever it is."""
    if is_lab_folder(path):
        return LabFolder.from_parent(parent, path=path, nodeid=lab_name_of(path))
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Module | pytest.Class, name: str, obj: object) -> pytest.Item | None:
    """A step's test functions are its checks, named after them (``gpuop/step-5::pending-reason``)."""
    return collector.check_item(name, obj) if isinstance(collector, StepModule) else None


def _lab_of(item: pytest.Item, settings: settings_mod.RunSettings) -> str:
    folder = next((node for node in item.listchain() if isinstance(node, LabFolder)), None)
    return folder.nodeid if folder is not None else (settings.lab.name if settings.lab else "lab")


def _the_collected_lab(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``pytest path/to/lab`` without --lab: the one lab folder collected is the run's lab."""
    settings = config.stash[settings_key]
    folders = {node.path for item in items for node in item.listchain() if isinstance(node, LabFolder)}
    if settings.lab is None and len(folders) == 1:
        chosen = load_lab(folders.pop())
        sources = {**settings.sources, "lab": "the lab folder collected"}
        if settings.lab_root is None:
            sources["lab_root"] = f"the default of lab {chosen.name}"
        root = chosen.learner_root(settings.lab_root)
        config.stash[settings_key] = dataclasses.replace(settings, lab=chosen, lab_root=root, sources=sources)


def _steps_chosen(config: pytest.Config, items: list[pytest.Item], results: dict[str, CheckRun]) -> None:
    """``--step``: deselect the other steps' checks; they stay in the reports as not graded."""
    chosen = config.stash[settings_key].steps
    if chosen is None:
        return
    present = {run.step.number for run in results.values()}
    if present and not chosen & present:
        raise pytest.UsageError(
            f"{config.stash[settings_key].sources['step']} chooses step {listed(map(str, sorted(chosen)))}, "
            f"and the lab has steps {listed(map(str, sorted(present)))}."
        )
    left_out = [item for item in items if item.nodeid in results and results[item.nodeid].step.number not in chosen]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


def _user_set_a_timeout(config: pytest.Config) -> bool:
    """pytest-timeout's own setting (option, PYTEST_TIMEOUT or ini) wins over the labs' timeouts."""
    return any((config.getoption("timeout", None), os.environ.get("PYTEST_TIMEOUT"), config.getini("timeout")))


def _time_limits(config: pytest.Config, items: list[pytest.Item], results: dict[str, CheckRun]) -> None:
    """Each check's time limit: its step marker's timeout, else the lab's check_timeout."""
    settings = config.stash[settings_key]
    if settings.lab is None or _user_set_a_timeout(config):
        return
    for item in items:
        run = results.get(item.nodeid)
        if run is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(run.step.timeout or settings.lab.check_timeout))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every step and check marker now (an author's error), and count every check as possible."""
    _the_collected_lab(config, items)
    settings = config.stash[settings_key]
    graders = settings.lab.folder.resolve() if settings.lab else None
    results = config.stash.setdefault(results_key, {})
    for item in items:
        if item.get_closest_marker("step") or (graders and graders in Path(item.path).resolve().parents):
            step = step_of(item)
            module = item.getparent(StepModule)
            if module is not None and module.step_number not in (None, step.number):
                raise pytest.UsageError(
                    f"{module.path.name} is marked step {step.number}; a step module's file name starts with its own step number."
                )
            run = results[item.nodeid] = CheckRun(step, check_of(item, _lab_of(item, settings), step), item.nodeid)
            item.user_properties += [
                ("gpulab_lab", _lab_of(item, settings)),
                ("gpulab_step", step.number),
                ("gpulab_check", run.check.id),
            ]
    validate_points((run.step, run.check) for run in results.values())
    validate_needs(run.step for run in results.values())
    _steps_chosen(config, items, results)
    _time_limits(config, items, results)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Try the sandbox in the background if a check runs a learner's script, and meanwhile import the
    kubernetes client if a check reads the cluster."""
    if session.config.getoption("collectonly"):
        return
    grading = session.config.stash[settings_key].lab is not None
    if grading:
        gc.freeze()  # what collection imported lives as long as the grading: collections need not go through it
    used = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    if "script_runner" in used:
        probing = threading.Thread(target=sandbox.probe, name="gpulab-probe-sandbox", daemon=True)
        probing.start()
        session.config.stash[probing_key] = probing
    if "lab_cluster" in used:
        warm_up(freeze=grading)


def pytest_unconfigure(config: pytest.Config) -> None:
    """A probe still under way (no check asked for the sandbox) ends with the run, its folder removed."""
    if (probing := config.stash.get(probing_key, None)) is not None:
        probing.join(timeout=sandbox.PROBE_TIMEOUT + 5)


# -- results -------------------------------------------------------------------------


def notes_of(item: pytest.Item) -> list[str]:
    return [str(note) for key, note in item.user_properties if key == "gpulab_note"]


def _run_of(config: pytest.Config, nodeid: str) -> CheckRun | None:
    return config.stash.get(results_key, {}).get(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Once a check of a step is blocked, the step's other checks are not run: one cause, said once."""
    run = _run_of(item.config, item.nodeid)
    if run is None:
        return
    steps = item.config.stash[results_key].values()
    blocker = next(
        (other for other in steps if other.step.number == run.step.number and other.outcome == BLOCKED), None
    )
    if blocker is not None:
        raise StepBlocked(f"Not run: step {run.step.number} is blocked.", step=blocker.blocked_by)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A wrong answer reads as the grader's sentence under the check's id; each result is kept for the reports."""
    report: pytest.TestReport = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, StepFailed):
        report.longrepr = call.excinfo.value.learner_text()
    run = _run_of(item.config, item.nodeid)
    if run is not None:
        report.location = (report.location[0], report.location[1], run.check.id)
        reporting.record(run, report, call, notes_of(item))
        if report.when == "teardown":
            report.user_properties += [("gpulab_outcome", run.outcome), ("gpulab_points", _points_of(item, run))]
    return report


def _points_of(item: pytest.Item, run: CheckRun) -> str:
    step = next(r for r in reporting.step_results(item.config) if r.step.number == run.step.number)
    return f"{step.earned}/{step.possible}" if run.check.points is None else f"{run.check.points}"


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """Blocked and error checks are counted and lettered as such, not as failures."""
    run = _run_of(config, report.nodeid)
    if run is None or not report.failed or report.when == "teardown":
        return None
    if run.outcome == BLOCKED:
        return "blocked", "B", "BLOCKED"
    if run.outcome == FAILED:  # a wrong answer found while setting up (a missing file) is a failure too
        return "failed", "F", "FAILED"
    if run.outcome == ERROR:
        return "error", "E", "ERROR"
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
    """Each check carries its lab, step, title, points, id and outcome; a failure its feedback and detail."""
    run = _run_of(item.config, item.nodeid)
    if run is None:
        return {}
    return test_metadata(run, _lab_of(item, item.config.stash[settings_key]), call, notes_of(item))
