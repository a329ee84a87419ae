"""Grading a lab root from a test: `pytest --lab ...` in a subprocess, its report read back per step,
and the four kinds of tests every lab has (reference passes, traps fail their step, forms pass)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from variants import Variant, copy_root

from pytest_gpulab.kwok import KwokCluster
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


@dataclass
class StepResult:
    """A step as the grading report has it: its outcome, and every unsuccessful check's learner text."""

    outcome: str = "passed"
    message: str = ""
    checks: list[dict] = field(default_factory=list)  # each check's pytest-json-report metadata
    report: dict = field(default_factory=dict)  # the step in the grading report

    @property
    def notes(self) -> list[str]:
        return [note for check in self.checks for note in check.get("notes", [])]


def _learner_text(part: dict) -> str:
    return f"{part['message']} Hint: {part['hint']}" if part.get("hint") else part.get("message") or ""


def grade(pytester: pytest.Pytester, lab: str, root: Path, cluster: KwokCluster, *args: str) -> dict[int, StepResult]:
    """Grade ``root``: each step's outcome, its unsuccessful checks' messages and their metadata."""
    report = json_report(pytester, lab, root, cluster, *args)
    steps = {step["number"]: StepResult(step["outcome"], report=step) for step in report["gpulab"]["steps"]}
    for step in steps.values():
        texts = [_learner_text(step.report)] + [
            _learner_text(c) for c in step.report["checks"] if c["outcome"] != "passed"
        ]
        step.message = "\n".join(dict.fromkeys(text for text in texts if text))
    for test in report["tests"]:
        steps[test["metadata"]["step"]].checks.append(test["metadata"])
    assert set(steps) == set(range(1, 9)) and report["gpulab"]["complete"], report["gpulab"]
    return steps


def failing(steps: dict[int, StepResult]) -> dict[int, str]:
    return {number: step.message for number, step in steps.items() if step.outcome != "passed"}


def solve(lab: str, cluster: KwokCluster, root: Path, *steps: int) -> None:
    """The lab's reference solution, for the given steps (all when none)."""
    result = subprocess.run(
        ["bash", str(discover().get(lab).reference), str(root), *map(str, steps)],
        env=cluster.environment(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"reference solution failed:\n{result.stderr[-4000:]}"


# Written by the cluster's own components while anything runs: their versions move by themselves.
SELF_UPDATING = {"leases.coordination.k8s.io", "events", "events.events.k8s.io"}


def resource_versions(cluster: KwokCluster) -> dict[tuple[str, str, str], str]:
    """Every object of every listable resource, by (kind, namespace, name), with its resourceVersion."""
    names = cluster.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    listed = cluster.get_json(",".join(n for n in names if n not in SELF_UPDATING), "-A")
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in listed["items"]
        if "resourceVersion" in o["metadata"]  # computed on read (ComponentStatus): nothing stored to change
    }


def learner_hashes(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_reference_passes(pytester: pytest.Pytester, lab: str, root: Path, cluster: KwokCluster) -> None:
    """The reference passes every step, and grading it changed no learner file and no cluster object."""
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    hashes, versions = learner_hashes(root), resource_versions(cluster)
    steps = grade(pytester, lab, root, cluster)
    assert failing(steps) == {}
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before, "the grader changed the learner's files"
    assert learner_hashes(root) == hashes, "the grader changed the learner's files"
    after = resource_versions(cluster)
    changed = {
        key: (versions.get(key), after.get(key))
        for key in versions.keys() | after.keys()
        if versions.get(key) != after.get(key)
    }
    assert changed == {}, f"cluster objects changed while grading: {changed}"
    for number, step in steps.items():
        for check in step.checks:
            assert check["lab"] == lab and check["step"] == number and check["check"].startswith(f"{lab}.{number}.")
            assert check["title"] and check["points"] > 0


def assert_trap_fails_its_step(pytester, lab, reference, tmp_path: Path, variant: Variant) -> None:
    cluster, reference_root = reference
    root = copy_root(reference_root, tmp_path / "root")
    variant.change(root)
    failures = failing(grade(pytester, lab, root, cluster, *variant.grader_args))
    assert variant.failing_step is not None and set(failures) == {variant.failing_step}, failures
    message = failures[variant.failing_step]
    for fragment in variant.says:
        assert fragment in message, message
    for fragment in variant.says_not:
        assert fragment not in message, message
    assert "Traceback" not in message and not any("Error" in line.split(":")[0] for line in message.splitlines())


def assert_form_passes(pytester, lab, reference, tmp_path: Path, variant: Variant) -> None:
    cluster, reference_root = reference
    root = copy_root(reference_root, tmp_path / "root")
    variant.change(root)
    steps = grade(pytester, lab, root, cluster)
    assert failing(steps) == {}
    if variant.note:
        notes = [note for step in steps.values() for note in step.notes]
        assert any(variant.note in note for note in notes), notes


def assert_untouched_start_fails_every_step_cleanly(pytester, lab: str, root: Path, cluster: KwokCluster) -> None:
    start = grade(pytester, lab, root, cluster)
    assert set(failing(start)) == set(range(1, 9))
    for number, step in start.items():
        assert step.outcome in ("failed", "blocked"), (number, step.report)
        if step.outcome == "blocked":  # named with its cause: the earlier step, and what it said
            assert step.report["message"].startswith(f"Blocked by step {step.report['blocked_by'][0]}:"), step.report
            assert "Because step" in step.report["message"], step.report
        assert step.message and "Traceback" not in step.message, (number, step.message)
