"""Grading a lab root from a test: `pytest --lab ...` in a subprocess, its pytest-json-report read back, and
the lab's reference solution. Proving a lab (reference, untouched start, forms and traps) is `gpulab selftest`
(pytest_gpulab/selftest.py, run by tests/test_selftest.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs import discover


def json_report(pytester: pytest.Pytester, lab: str, root: Path, cluster: KwokCluster, *args: str) -> dict[str, Any]:
    """The pytest-json-report of grading ``root`` against ``cluster``; the run must end as graded (0 or 1)."""
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        f"--lab={lab}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
        "--json-report", f"--json-report-file={report}", "-p", "no:cacheprovider", *args,
    )  # fmt: skip
    assert result.ret in (0, 1), result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    return json.loads(report.read_text())


def solve(lab: str, cluster: KwokCluster, root: Path, *steps: int) -> None:
    """The lab's reference solution, for the given steps (all when none)."""
    result = subprocess.run(
        ["bash", str(discover().get(lab).reference), str(root), *map(str, steps)],
        env=cluster.environment(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"reference solution failed:\n{result.stderr[-4000:]}"


# A cluster-scoped custom resource of the tests' own, for what discovery and a copy make of a kind.
WIDGET_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.tests.gpulab.example}
spec:
  group: tests.gpulab.example
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""
