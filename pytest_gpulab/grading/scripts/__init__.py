"""The scripts kit: a learner script's runs and the verdicts it prints, beyond its declared contract.

Example::

    from pytest_gpulab.grading import scripts

    run = learner_script.run("bin/check.sh", "gpu-operator", cluster=True)
    scripts.expect_verdict(run.result, "bin/check.sh", "Run on gpu-operator", {"MISSING=nvidia"}, prefix="MISSING")

A run: :class:`Run`, :func:`said`, and the cause of a wrong exit status, :func:`exit_diagnosis`. Its verdict: :func:`expect_verdict`, :func:`findings_in`,
:func:`says_ok`, :func:`near_miss_hint`, and a saved one, :func:`expect_saved_verdict`. A view of the cluster a step doctors for a
run: :class:`DoctoredView` (imported on first use: it needs the Kubernetes client), and :data:`FAILING_API`.
The contract every checker is held to is declared with the core's ``Checker``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ...sandbox.script_result import said
from .diagnose import exit_diagnosis
from .runs import Run
from .verdicts import FAILING_API, expect_saved_verdict, expect_verdict, findings_in, near_miss_hint, says_ok

if TYPE_CHECKING:
    from ...sandbox.clusterview import DoctoredView

__all__ = [
    "FAILING_API",
    "DoctoredView",
    "Run",
    "exit_diagnosis",
    "expect_saved_verdict",
    "expect_verdict",
    "findings_in",
    "near_miss_hint",
    "said",
    "says_ok",
]


def __getattr__(name: str) -> Any:
    """:class:`DoctoredView` on first use: the Kubernetes client it needs takes ~0.2 s to import."""
    if name != "DoctoredView":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = import_module("...sandbox.clusterview", __package__).DoctoredView
    globals()[name] = value
    return value
