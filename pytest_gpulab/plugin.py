"""pytest hooks of pytest-gpulab; the fixtures live in :mod:`pytest_gpulab.fixtures`.

``pytest --lab gpuop`` collects the lab's folder: one module per step, one
test function per named check. A wrong answer is reported as the grader's
sentence, without a traceback; the instructor's detail goes to the JSON
report's ``metadata`` of that check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from . import reporting
from . import settings as settings_mod
from .collect import LabFolder, StepModule, is_lab_folder, lab_name_of
from .feedback import StepFailed
from .fixtures import (  # noqa: F401  (the plugin module registers the fixtures)
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
    script_runner,
    settings_key,
)
from .guard import stay_out_of
from .labfile import Lab, load_lab
from .reporting import CheckRun, results_key
from .steps import check_of, step_of, validate_points

early_lab_key = pytest.StashKey[tuple[Lab | None, settings_mod.Found | None]]()

# -- options, settings and what is collected -----------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    settings_mod.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """With a lab chosen and no paths given, collect that lab's folder; take nothing from the learner's directory."""
    namespace = early_config.known_args_namespace
    chosen, found = settings_mod.lab_from(early_config, namespace=namespace)
    early_config.stash[early_lab_key] = (chosen, found)
    if chosen is None:
        return
    learner_root, _ = settings_mod.lab_root_from(early_config, chosen, namespace=namespace)
    stay_out_of((learner_root or chosen.default_root).resolve(), early_config)
    if not namespace.file_or_dir:
        args.append(str(chosen.folder))  # documented: this hook may add to the command line's arguments


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "step(number, title, points=1): the lab step a module's checks grade, its title and points."
    )
    config.addinivalue_line(
        "markers",
        "check(name=None, *, points=None): a check's stable name, and its own points if the step splits them.",
    )
    config.stash[settings_key] = settings_mod.resolve(config, config.stash.get(early_lab_key, None))
    config.pluginmanager.register(JsonSummary(config), "gpulab-json-summary")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return config.stash[settings_key].header()


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
        root = settings.lab_root or chosen.default_root
        config.stash[settings_key] = dataclasses.replace(settings, lab=chosen, lab_root=root, sources=sources)


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
            results[item.nodeid] = CheckRun(step, check_of(item, _lab_of(item, settings), step))
            item.user_properties += [("gpulab_step", step.number), ("gpulab_check", results[item.nodeid].check.id)]
    validate_points(reporting.scores(config))


# -- results -------------------------------------------------------------------------


def notes_of(item: pytest.Item) -> list[str]:
    return [str(note) for key, note in item.user_properties if key == "gpulab_note"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A wrong answer reads as the grader's sentence under the check's id; each result is kept for the summaries."""
    report: pytest.TestReport = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, StepFailed):
        report.longrepr = call.excinfo.value.learner_text()
    run = item.config.stash.get(results_key, {}).get(item.nodeid)
    if run is not None:
        report.location = (report.location[0], report.location[1], run.check.id)
        reporting.record(run, report, call, notes_of(item))
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any]:
    """Each check carries its lab, step, title, points and id; a failure its feedback and detail."""
    run = item.config.stash.get(results_key, {}).get(item.nodeid)
    if run is None:
        return {}
    return reporting.test_metadata(run, item.config.stash[settings_key], call, notes_of(item))


class JsonSummary:
    """pytest-json-report's hook, bound to this run's config: the per-step totals for autograders."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        summary = reporting.run_summary(self.config, self.config.stash[settings_key])
        if summary is not None:
            json_report["gpulab"] = summary


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    settings = config.stash[settings_key]
    if settings.lab is None or not reporting.scores(config):
        return
    terminalreporter.section(f"lab {settings.lab.name} (rubric {settings.lab.rubric_version})")
    for line in reporting.terminal_lines(config, settings):
        terminalreporter.write_line(line)
