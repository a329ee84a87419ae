"""The run's settings as options: each one an option, an ini setting and an environment variable, one help text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

LAB_CLUSTER_CHOICES = ("existing", "ephemeral")
DEFAULT_SCRIPT_TIMEOUT = 20.0
DEFAULT_GRADING_BUDGET = 180.0  # some 30 times an honest grading of the longest lab, on a 2-core machine


@dataclass(frozen=True)
class Setting:
    name: str  # option dest and ini name suffix
    flag: str
    env: str
    help: str
    metavar: str
    ini_type: Literal["string", "paths", "float", "int"] = "string"
    choices: tuple[str, ...] = ()

    @property
    def ini(self) -> str:
        return f"gpulab_{self.name}"

    @property
    def dest(self) -> str:
        return f"gpulab_{self.name}"


LAB = Setting("lab", "--lab", "GPULAB_LAB", "Lab to grade: collects its steps (e.g. gpuop).", "NAME")
LAB_DIR = Setting(
    "lab_dir",
    "--lab-dir",
    "GPULAB_LAB_DIR",
    "A folder holding a lab (its lab.toml) or lab folders, besides the installed labs; may be repeated "
    "(the environment variable takes a ':'-separated list). A lab found here wins over an installed one "
    "of the same name.",
    "PATH",
    ini_type="paths",
)
LAB_ROOT = Setting(
    "lab_root",
    "--lab-root",
    "GPULAB_LAB_ROOT",
    "The learner's lab directory (default: the lab's own, e.g. /root/gpuop).",
    "PATH",
)
LAB_ROOT_RECORDED = Setting(
    "lab_root_recorded",
    "--lab-root-recorded",
    "GPULAB_LAB_ROOT_RECORDED",
    "Where the learner's lab directory stood when it was bundled (a bundle's manifest records it; `gpulab grade` "
    "passes it): a path the learner wrote under it, such as an absolute imports glob, is read from --lab-root "
    "(default: none; paths under the lab's default root are always read so).",
    "PATH",
)
KUBECONFIG = Setting(
    "kubeconfig",
    "--kubeconfig",
    "KUBECONFIG",
    "Kubeconfig of the learner's running lab cluster (default: the cluster `gpulab up LAB` "
    "started, else ~/.kube/config).",
    "PATH",
)
LAB_CLUSTER = Setting(
    "lab_cluster",
    "--lab-cluster",
    "GPULAB_LAB_CLUSTER",
    "'existing' grades the cluster the kubeconfig points at (default); 'ephemeral' starts a "
    "fresh lab cluster for this run and deletes it afterwards.",
    "MODE",
    choices=LAB_CLUSTER_CHOICES,
)
SCRIPT_TIMEOUT = Setting(
    "script_timeout",
    "--script-timeout",
    "GPULAB_SCRIPT_TIMEOUT",
    f"Seconds a learner script may run before its process group is killed (default {DEFAULT_SCRIPT_TIMEOUT:g}).",
    "SECONDS",
    ini_type="float",
)
GRADING_BUDGET = Setting(
    "grading_budget",
    "--grading-budget",
    "GPULAB_GRADING_BUDGET",
    "Seconds the whole grading may take; past them every check not yet graded fails, saying which learner scripts "
    "used the time, or is an error to grade again when the machine was too busy to run the grading "
    f"(default {DEFAULT_GRADING_BUDGET:g}).",
    "SECONDS",
    ini_type="float",
)
SEED = Setting(
    "seed",
    "--lab-seed",
    "GPULAB_SEED",
    "Seed of the graders' random choices (e.g. which handlers a generated dump leaves out); the header and "
    "the report show the run's seed, so a grading can be replayed (default: a new one each run).",
    "N",
    ini_type="int",
)
STEP = Setting(
    "step",
    "--step",
    "GPULAB_STEP",
    "Grade only these steps, e.g. 5, 5-7 or 1,3,5-7; the others are reported as not graded (default: all).",
    "STEPS",
)
REPORT = Setting(
    "report",
    "--gpulab-report",
    "GPULAB_REPORT",
    "Write the grading report (JSON) here, rewritten after every check, so that even a run killed "
    "outright leaves one, marked incomplete (default: none).",
    "PATH",
)
GRADESCOPE = Setting(
    "gradescope",
    "--gradescope-results",
    "GPULAB_GRADESCOPE",
    "Write Gradescope's autograder results.json here at the end of the run (default: none).",
    "PATH",
)
ALL_SETTINGS = (
    LAB,
    LAB_DIR,
    LAB_ROOT,
    LAB_ROOT_RECORDED,
    KUBECONFIG,
    LAB_CLUSTER,
    SCRIPT_TIMEOUT,
    GRADING_BUDGET,
    SEED,
    STEP,
    REPORT,
    GRADESCOPE,
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpulab", "GPU-operations lab grading")
    for setting in ALL_SETTINGS:
        extra: dict[str, Any] = {"choices": setting.choices} if setting.choices else {}
        if setting.ini_type == "paths":
            extra["action"] = "append"
        group.addoption(
            setting.flag,
            dest=setting.dest,
            default=None,
            metavar=setting.metavar,
            help=f"{setting.help} [env {setting.env}, ini {setting.ini}]",
            **extra,
        )
        parser.addini(
            setting.ini, setting.help, type=setting.ini_type, default=[] if setting.ini_type == "paths" else None
        )
