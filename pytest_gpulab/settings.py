"""The run's settings: each one an option, an ini setting and an environment variable.

Precedence, lowest first: ini setting < environment variable < command-line
option. One help text serves the option and the ini setting.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import toolchain
from .labs import Lab, UnknownLab, get_lab

LAB_CLUSTER_CHOICES = ("existing", "ephemeral")
DEFAULT_SCRIPT_TIMEOUT = 20.0


@dataclass(frozen=True)
class Setting:
    name: str  # option dest and ini name suffix
    flag: str
    env: str
    help: str
    metavar: str

    @property
    def ini(self) -> str:
        return f"gpulab_{self.name}"


LAB = Setting("lab", "--lab", "GPULAB_LAB", "Lab to grade: collects its graders (e.g. gpuop).", "NAME")
LAB_ROOT = Setting(
    "lab_root", "--lab-root", "GPULAB_LAB_ROOT",
    "The learner's lab directory (default: the lab's own, e.g. /root/gpuop).", "PATH",
)
KUBECONFIG = Setting(
    "kubeconfig", "--kubeconfig", "KUBECONFIG",
    "Kubeconfig of the learner's running lab cluster (default: the cluster `gpulab up LAB` "
    "started, else ~/.kube/config).", "PATH",
)
LAB_CLUSTER = Setting(
    "lab_cluster", "--lab-cluster", "GPULAB_LAB_CLUSTER",
    "'existing' grades the cluster the kubeconfig points at (default); 'ephemeral' starts a "
    "fresh lab cluster for this run and deletes it afterwards.", "MODE",
)
SCRIPT_TIMEOUT = Setting(
    "script_timeout", "--script-timeout", "GPULAB_SCRIPT_TIMEOUT",
    f"Seconds a learner script may run before its process group is killed (default {DEFAULT_SCRIPT_TIMEOUT:g}).", "SECONDS",
)
ALL_SETTINGS = (LAB, LAB_ROOT, KUBECONFIG, LAB_CLUSTER, SCRIPT_TIMEOUT)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpulab", "GPU-operations lab grading")
    for setting in ALL_SETTINGS:
        extra = {"choices": LAB_CLUSTER_CHOICES} if setting is LAB_CLUSTER else {}
        group.addoption(setting.flag, dest=f"gpulab_{setting.name}", default=None, metavar=setting.metavar, help=f"{setting.help} [env {setting.env}, ini {setting.ini}]", **extra)
        parser.addini(setting.ini, setting.help, default=None)


def raw_value(config: pytest.Config, setting: Setting, *, namespace: object | None = None) -> str | None:
    """The winning value by precedence: option, else environment, else ini."""
    source = namespace if namespace is not None else config.option
    option = getattr(source, f"gpulab_{setting.name}", None)
    if option not in (None, ""):
        return str(option)
    env = os.environ.get(setting.env)
    if env:
        return env
    ini = config.getini(setting.ini)
    return str(ini) if ini not in (None, "", []) else None


def lab_from(config: pytest.Config, *, namespace: object | None = None) -> Lab | None:
    name = raw_value(config, LAB, namespace=namespace)
    if name is None:
        return None
    try:
        return get_lab(name, gradable=True)
    except UnknownLab as error:
        raise pytest.UsageError(f"{error}. Run e.g. `pytest --lab gpuop`.") from None


def lab_root_from(config: pytest.Config, lab: Lab | None, *, namespace: object | None = None) -> Path | None:
    """The learner's directory: the setting, else the lab's own."""
    value = raw_value(config, LAB_ROOT, namespace=namespace)
    return Path(value).expanduser() if value else (lab.default_root if lab else None)


def gpulab_up_kubeconfig(lab: str) -> Path:
    """Where ``gpulab up LAB`` keeps the kubeconfig of the cluster it started."""
    return toolchain.cache_root() / "clusters" / lab / "clusters" / f"gpulab-{lab}" / "kubeconfig.yaml"


def effective_kubeconfig(kubeconfig: str | None, lab: Lab) -> str | None:
    """The kubeconfig as set, else the `gpulab up` cluster's if it exists (None: ~/.kube/config)."""
    if kubeconfig is None and gpulab_up_kubeconfig(lab.name).exists():
        return str(gpulab_up_kubeconfig(lab.name))
    return kubeconfig


@dataclass(frozen=True)
class RunSettings:
    lab: Lab | None
    lab_root: Path | None
    kubeconfig: str | None  # as set; None: the `gpulab up` cluster's if there is one, else ~/.kube/config
    lab_cluster: str
    script_timeout: float


def resolve(config: pytest.Config) -> RunSettings:
    """Read and validate every setting; cheap, no cluster or file access."""
    lab = lab_from(config)
    lab_root = lab_root_from(config, lab)

    kubeconfig = raw_value(config, KUBECONFIG)

    lab_cluster = raw_value(config, LAB_CLUSTER) or "existing"
    if lab_cluster not in LAB_CLUSTER_CHOICES:
        raise pytest.UsageError(
            f"{LAB_CLUSTER.env}/{LAB_CLUSTER.ini} is {lab_cluster!r}; use one of {', '.join(LAB_CLUSTER_CHOICES)}."
        )

    timeout_value = raw_value(config, SCRIPT_TIMEOUT)
    try:
        script_timeout = float(timeout_value) if timeout_value else DEFAULT_SCRIPT_TIMEOUT
    except ValueError:
        script_timeout = -1.0
    if not (script_timeout > 0 and math.isfinite(script_timeout)):
        raise pytest.UsageError(f"the script timeout must be a positive number of seconds, got {timeout_value!r}.")
    return RunSettings(lab, lab_root, kubeconfig, lab_cluster, script_timeout)
