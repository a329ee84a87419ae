"""The run's settings: each one an option, an ini setting and an environment variable.

Precedence, lowest first: ini setting < environment variable < command-line
option. One help text serves the option and the ini setting. Every resolved
value remembers where it came from, and an error names that place.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .cluster import toolchain
from .labs.discovery import Catalog, Lab, UnknownLab, discover
from .options import (
    DEFAULT_GRADING_BUDGET,
    DEFAULT_SCRIPT_TIMEOUT,
    GRADESCOPE,
    GRADING_BUDGET,
    KUBECONFIG,
    LAB,
    LAB_CLUSTER,
    LAB_DIR,
    LAB_ROOT,
    LAB_ROOT_RECORDED,
    REPORT,
    SCRIPT_TIMEOUT,
    SEED,
    STEP,
    Setting,
)


@dataclass(frozen=True)
class Found:
    """A setting's winning value and where it came from, for messages and the report header."""

    value: Any
    source: str


def lookup(config: pytest.Config, setting: Setting, *, namespace: object | None = None) -> Found | None:
    """The winning value by precedence: option, else environment, else ini; None when unset."""
    option = getattr(namespace if namespace is not None else config.option, setting.dest, None)
    if option not in (None, "", []):
        return Found(option, f"the option {setting.flag}")
    if env := os.environ.get(setting.env):
        value: Any = [Path(part) for part in env.split(os.pathsep) if part] if setting.ini_type == "paths" else env
        return Found(value, f"the environment variable {setting.env}")
    where = f"the ini setting {setting.ini} in {config.inipath}"
    try:
        ini = config.getini(setting.ini)
    except (pytest.UsageError, ValueError) as error:
        raise pytest.UsageError(f"{where} is not valid: {error}.") from None
    return Found(ini, where) if ini not in (None, "", []) else None


def lab_dirs_from(config: pytest.Config, *, namespace: object | None = None) -> list[Path]:
    found = lookup(config, LAB_DIR, namespace=namespace)
    return [Path(str(path)).expanduser() for path in found.value] if found else []


def lab_from(config: pytest.Config, *, namespace: object | None = None) -> tuple[Lab | None, Found | None]:
    """The chosen lab among those discovered (installed, and the lab directories)."""
    found = lookup(config, LAB, namespace=namespace)
    lab_dirs = lab_dirs_from(config, namespace=namespace)
    if found is None and not lab_dirs:
        return None, None
    catalog: Catalog = discover(lab_dirs)
    if found is None:  # a single lab folder given: that lab
        given = [
            lab for lab in catalog.labs.values() if any(lab.folder == d or lab.folder.parent == d for d in lab_dirs)
        ]
        return (given[0], Found(given[0].name, f"the only lab in {LAB_DIR.flag}")) if len(given) == 1 else (None, None)
    try:
        return catalog.get(str(found.value)), found
    except UnknownLab as error:
        raise pytest.UsageError(
            f"{error}\n(The lab name came from {found.source}.) Run e.g. `pytest --lab gpuop`."
        ) from None


def lab_root_from(
    config: pytest.Config, lab: Lab | None, *, namespace: object | None = None
) -> tuple[Path | None, str]:
    """The learner's directory: the setting, else the lab's own."""
    found = lookup(config, LAB_ROOT, namespace=namespace)
    if found:
        return Path(str(found.value)).expanduser(), found.source
    return (lab.default_root, f"the default of lab {lab.name}") if lab else (None, "unset")


def effective_kubeconfig(kubeconfig: str | None, lab: Lab) -> str | None:
    """The kubeconfig as set, else the `gpulab up` cluster's if it exists (None: ~/.kube/config)."""
    if kubeconfig is None and toolchain.up_kubeconfig(lab.name).exists():
        return str(toolchain.up_kubeconfig(lab.name))
    return kubeconfig


@dataclass(frozen=True)
class RunSettings:
    lab: Lab | None
    lab_root: Path | None
    kubeconfig: str | None  # as set; None: the `gpulab up` cluster's if there is one, else ~/.kube/config
    lab_cluster: str
    script_timeout: float
    seed: int = 0
    sources: Mapping[str, str] = field(default_factory=dict)  # setting name -> where its value came from
    steps: frozenset[int] | None = None  # --step; None: every step
    report: Path | None = None
    gradescope: Path | None = None
    lab_root_recorded: str | None = None  # where the root stood when it was bundled
    grading_budget: float = DEFAULT_GRADING_BUDGET  # seconds for the whole grading (budget.py)

    def header(self) -> list[str]:
        if self.lab is None:
            return []
        cluster = (
            "a fresh ephemeral lab cluster"
            if self.lab_cluster == "ephemeral"
            else effective_kubeconfig(self.kubeconfig, self.lab) or "~/.kube/config"
        )
        return [
            f"gpulab: lab {self.lab.name} (rubric {self.lab.rubric_version}) from {self.lab.folder} [{self.sources['lab']}]",
            f"gpulab: learner root {self.lab_root} [{self.sources['lab_root']}]",
            f"gpulab: cluster {cluster} [{self.sources.get('kubeconfig', 'default')}]",
            f"gpulab: seed {self.seed} [{self.sources.get('seed', 'default')}] (replay with --lab-seed={self.seed})",
        ]


def _choice(config: pytest.Config, setting: Setting, default: str) -> Found:
    found = lookup(config, setting) or Found(default, "the default")
    if found.value not in setting.choices:
        raise pytest.UsageError(
            f"{found.source} is {found.value!r}; {setting.flag.lstrip('-')} is one of {', '.join(setting.choices)}."
        )
    return found


def _seconds(config: pytest.Config, setting: Setting, default: float, what: str = "the script timeout") -> Found:
    found = lookup(config, setting) or Found(default, "the default")
    try:
        seconds = float(found.value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise pytest.UsageError(f"{found.source} is {found.value!r}; {what} must be a positive number of seconds.")
    return Found(seconds, found.source)


def _seed(config: pytest.Config) -> Found:
    found = lookup(config, SEED)
    if found is None:
        return Found(secrets.randbelow(10**9), "a new one for this run")
    try:
        return Found(int(found.value), found.source)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{found.source} is {found.value!r}; the seed is a whole number.") from None


def resolve(config: pytest.Config, lab: tuple[Lab | None, Found | None] | None = None) -> RunSettings:
    """Read and validate every setting; ``lab`` is what the early hook already found."""
    chosen, lab_found = lab if lab is not None else lab_from(config)
    lab_root, root_source = lab_root_from(config, chosen)
    kubeconfig = lookup(config, KUBECONFIG)
    cluster = _choice(config, LAB_CLUSTER, "existing")
    timeout = _seconds(config, SCRIPT_TIMEOUT, DEFAULT_SCRIPT_TIMEOUT)
    budget = _seconds(config, GRADING_BUDGET, DEFAULT_GRADING_BUDGET, "the grading budget")
    seed = _seed(config)
    steps = lookup(config, STEP)
    report, gradescope = lookup(config, REPORT), lookup(config, GRADESCOPE)
    recorded = lookup(config, LAB_ROOT_RECORDED)
    sources = {
        "step": steps.source if steps else "default",
        "seed": seed.source,
        "lab": lab_found.source if lab_found else "unset",
        "lab_root": root_source,
        "kubeconfig": kubeconfig.source if kubeconfig else "default",
        "lab_cluster": cluster.source,
        "script_timeout": timeout.source,
        "grading_budget": budget.source,
    }
    kubeconfig_value = str(kubeconfig.value) if kubeconfig else None
    return RunSettings(
        chosen,
        lab_root,
        kubeconfig_value,
        cluster.value,
        timeout.value,
        seed.value,
        sources,
        steps=_steps(steps),
        report=_path(report),
        gradescope=_path(gradescope),
        lab_root_recorded=str(recorded.value) if recorded and str(recorded.value).startswith("/") else None,
        grading_budget=budget.value,
    )


def _path(found: Found | None) -> Path | None:
    return Path(str(found.value)).expanduser().absolute() if found else None


def _steps(found: Found | None) -> frozenset[int] | None:
    if found is None:
        return None
    try:
        return parse_steps(str(found.value))
    except ValueError as error:
        raise pytest.UsageError(f"{found.source} is {found.value!r}: {error}.") from None


def parse_steps(text: str) -> frozenset[int]:
    """``"5"``, ``"5-7"``, ``"1,3,5-7"`` -> the step numbers."""
    numbers: set[int] = set()
    for part in text.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()) or int(first) < 1:
            raise ValueError("steps are numbers and ranges separated by commas, e.g. 5, 5-7 or 1,3,5-7")
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise ValueError(f"the range {part} runs backwards; write {high}-{low}")
        numbers.update(range(low, high + 1))
    return frozenset(numbers)


settings_key = pytest.StashKey[RunSettings]()  # the run's settings, in the config's stash
