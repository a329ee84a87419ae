"""Grading a lab root from a test: `pytest --lab ...` in a subprocess, its JSON report read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulab.kwok import KwokCluster


def json_report(pytester: pytest.Pytester, lab: str, root: Path, cluster: KwokCluster, *args: str) -> dict[str, Any]:
    """The pytest-json-report of grading ``root`` against ``cluster``; the run must end as graded (0 or 1)."""
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        f"--lab={lab}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
        "--json-report", f"--json-report-file={report}", "-p", "no:cacheprovider", *args,
    )  # fmt: skip
    assert result.ret in (0, 1), result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    return json.loads(report.read_text())
