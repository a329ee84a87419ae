"""Everything a step module uses, from one import.

    from pytest_gpulab.grading import expect, expect_answers, number, written_and_applied

The names are grouped by what they are for: reading the learner's files, reading the cluster,
judging answers, learner scripts, and feedback. Each has a docstring with an example. Nothing
heavy is imported here: :class:`DoctoredView`, which needs the Kubernetes client, is imported on
first use, so ``pytest --help`` and a lab that does not use it never pay for the client.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..labs.labfile import HOSTNAME_LABEL
from ..sandbox.containerd_dumps import generate_dump
from ..sandbox.script_result import said
from .answers import (
    Answer,
    containing,
    count_of,
    exactly,
    expect_all,
    expect_answers,
    items,
    number,
    phrase,
    word,
    yes_no,
)
from .checker import Case, Cases, Checker
from .containerd_toml import (
    CRI_V2,
    CRI_V3_RUNTIME,
    RUNTIMES_TABLE_V2,
    cri_containerd,
    defined_runtimes,
    expect_plugins_match_version,
    find_key,
    imports_of,
    loaded_handlers,
    parse_key_path,
    runtime_option,
    runtime_table,
    stranded_table,
    table_name,
    top_level,
)
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
from .kube import (
    Rollout,
    advertised,
    check_runtimeclass,
    condition,
    containers,
    effective_request,
    expect_advertises,
    expect_advertises_none,
    handlers_of,
    image_and_memory,
    pins_to,
    pods_of,
    request,
    required_handlers,
    revisions_of,
    selects,
    unschedulable_because,
)
from .manifests import not_applied, written_and_applied
from .nodes import (
    SYSTEM_TAINT_PREFIX,
    coverage_gaps,
    daemonset_owner,
    is_cordoned,
    is_custom,
    is_ready,
    lab_nodes,
    labels_match,
    name_of,
    taints,
    tolerates,
    tolerations,
)
from .parsing import dig, yaml_in
from .scripts import Run
from .values import parse_quantity_number, parse_yes_no, quantity_bytes, split_list
from .verdicts import (
    FAILING_API,
    expect_saved_verdict,
    expect_verdict,
    findings_in,
    says_ok,
)

if TYPE_CHECKING:
    from ..sandbox.clusterview import DoctoredView

# Imported on first use: the Kubernetes client they need takes ~0.2 s.
_LAZY = {"DoctoredView": "..sandbox.clusterview"}

__all__ = [  # noqa: RUF022 - grouped by what each name is for, as the README lists them
    # Reading the learner's files (and any dict: dig)
    "CRI_V2",
    "CRI_V3_RUNTIME",
    "RUNTIMES_TABLE_V2",
    "cri_containerd",
    "defined_runtimes",
    "dig",
    "expect_plugins_match_version",
    "find_key",
    "imports_of",
    "loaded_handlers",
    "parse_key_path",
    "parse_quantity_number",
    "parse_yes_no",
    "quantity_bytes",
    "runtime_option",
    "runtime_table",
    "split_list",
    "stranded_table",
    "table_name",
    "top_level",
    "yaml_in",
    # Reading the cluster
    "HOSTNAME_LABEL",
    "SYSTEM_TAINT_PREFIX",
    "Rollout",
    "advertised",
    "check_runtimeclass",
    "condition",
    "containers",
    "coverage_gaps",
    "daemonset_owner",
    "effective_request",
    "expect_advertises",
    "expect_advertises_none",
    "handlers_of",
    "image_and_memory",
    "is_cordoned",
    "is_custom",
    "is_ready",
    "lab_nodes",
    "labels_match",
    "name_of",
    "not_applied",
    "pins_to",
    "pods_of",
    "request",
    "required_handlers",
    "revisions_of",
    "selects",
    "taints",
    "tolerates",
    "tolerations",
    "unschedulable_because",
    "written_and_applied",
    # Judging answers
    "Answer",
    "containing",
    "count_of",
    "exactly",
    "expect_all",
    "expect_answers",
    "items",
    "number",
    "phrase",
    "word",
    "yes_no",
    # Learner scripts
    "Case",
    "Cases",
    "Checker",
    "DoctoredView",
    "FAILING_API",
    "Run",
    "expect_saved_verdict",
    "expect_verdict",
    "findings_in",
    "generate_dump",
    "said",
    "says_ok",
    # Feedback
    "GradingError",
    "StepFailed",
    "Words",
    "blocked_unless",
    "expect",
    "expect_value",
    "fail",
    "listed",
    "should_be",
    "shown",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name], __package__), name)
    globals()[name] = value
    return value
