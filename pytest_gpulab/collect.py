"""Collecting a lab folder: the lab, its steps, and each step's named checks.

A folder holding ``lab.toml`` is collected as a :class:`LabFolder` (pytest's
custom directory collectors), wherever it lives. Its step modules are the
files ``stepN_*.py`` (or ``test_stepN_*.py``); other Python files are helpers
and are not collected (those whose names start with ``_`` are the lab's own,
imported by its steps). Node ids read like the lab, not like file paths:
``gpuop/step-5::pending-reason``. A check is a test function; its name is the
function's without ``test_`` (``pytest.mark.check("name")`` sets another).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .grading.scripts.checker import Checker
from .grading.scripts.contract import contract_checks
from .labs.labfile import LAB_FILE, LabFileError, load_lab
from .reports.steps import check_name_of, explicit_check

STEP_FILE = re.compile(r"(?:test_)?step_?0*(\d+)(?:[_-]\w*)?\.py")


def step_number_of(path: Path) -> int | None:
    match = STEP_FILE.fullmatch(path.name)
    return int(match.group(1)) if match else None


def lab_name_of(folder: Path) -> str:
    try:
        return load_lab(folder).name
    except LabFileError:
        return folder.name  # collect() reports the error


def own_helpers(folder: Path) -> None:
    """Make the lab's own helper modules (``_kit.py``: a name that starts with ``_``) the ones its steps import
    by name: its folder first on the import path, and another lab's module of the same name forgotten."""
    for helper in folder.glob("_*.py"):
        loaded = sys.modules.get(helper.stem)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve().parent != folder.resolve():
            del sys.modules[helper.stem]
    if sys.path[:1] != [str(folder)]:
        sys.path.insert(0, str(folder))


class LabFolder(pytest.Directory):
    """A lab: collects one :class:`StepModule` per step file, in step order."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        lab = load_lab(self.path)
        own_helpers(self.path)
        steps = sorted(
            (number, path) for path in self.path.glob("*.py") if (number := step_number_of(path)) is not None
        )
        for number, path in steps:
            if not self.ihook.pytest_ignore_collect(collection_path=path, config=self.config):
                yield StepModule.from_parent(self, path=path, nodeid=f"{lab.name}/step-{number}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, LabFileError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class StepModule(pytest.Module):
    """One step's module; its test functions are the step's checks, and each :class:`Checker` it declares adds
    its contract's checks (``contract-*``, :mod:`pytest_gpulab.grading.scripts.checker`) after them."""

    @property
    def step_number(self) -> int | None:
        return step_number_of(self.path)

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        collected = list(super().collect())
        checkers = [value for value in vars(self.obj).values() if isinstance(value, Checker)]
        for checker in checkers:
            for name, check in contract_checks(checker):
                collected.append(pytest.Function.from_parent(self, name=name, callobj=check))
        return collected

    def check_item(self, name: str, obj: object) -> pytest.Function | None:
        """A plain test function as an item named after its check; None leaves the rest to pytest."""
        if not (name.startswith("test") and inspect.isfunction(obj)) or inspect.isgeneratorfunction(obj):
            return None
        if any(getattr(mark, "name", None) == "parametrize" for mark in getattr(obj, "pytestmark", [])):
            return None  # parametrized checks keep pytest's names, test_x[id]
        try:
            explicit, _ = explicit_check(obj)
        except (TypeError, ValueError):
            explicit = None  # the plugin reports the bad marker as a usage error
        return pytest.Function.from_parent(self, name=explicit or check_name_of(name), callobj=obj)


def is_lab_folder(path: Path) -> bool:
    return (path / LAB_FILE).is_file()
