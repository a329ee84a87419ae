"""The authors' one import: a small core, and kits by subject imported as namespaces.

    from pytest_gpulab.grading import Checker, expect, shown
    from pytest_gpulab.grading import answers, containerd, k8s, scripts

The core is what every step uses:

- verdicts: :func:`expect`, :func:`expect_value`, :func:`fail`, :func:`blocked_unless`, and the two outcomes a
  check raises, :class:`StepFailed` (the learner's) and :class:`GradingError` (the grading's, retried);
- reading: :func:`dig` (and the methods of ``learner.file(...)``);
- wording: :func:`shown`, :func:`listed`, :func:`should_be`, :class:`Words`;
- the checker contract: :class:`Checker`, with its :class:`Cases` of :class:`Case`.

Everything else is in a kit, one module of one subject, each with an index in its docstring:
:mod:`.k8s` (the cluster and the learner's manifests), :mod:`.containerd` (containerd TOML and dumps),
:mod:`.answers` (result files), :mod:`.scripts` (a learner script's runs and verdicts). A lab's own helper
goes in a module of the lab's folder whose name starts with ``_`` (``_kit.py``), imported by its steps.
Nothing heavy is imported here: the Kubernetes client waits for the first check that needs it.
"""

from __future__ import annotations

from . import answers, containerd, k8s, scripts
from .feedback import (
    GradingError,
    StepFailed,
    Words,
    blocked_unless,
    expect,
    expect_value,
    fail,
    listed,
    should_be,
    shown,
)
from .parsing import dig
from .scripts.checker import Case, Cases, Checker

__all__ = [  # noqa: RUF022 - the core by what each name is for, as docs/authors.md lists it, then the kits
    # Verdicts
    "expect",
    "expect_value",
    "fail",
    "blocked_unless",
    "StepFailed",
    "GradingError",
    # Reading
    "dig",
    # Wording
    "shown",
    "listed",
    "should_be",
    "Words",
    # The checker contract
    "Checker",
    "Cases",
    "Case",
    # Kits, imported as namespaces
    "answers",
    "containerd",
    "k8s",
    "scripts",
]
