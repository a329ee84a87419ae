"""A learner's checker is held to its whole contract: on a real lab cluster, each run's writes are its own,
and an API server that fails (503, or unreachable) is shown to it as a failure, not a wait to its timeout; the
verdict helpers fail an all-clear on a failing API, a verdict that contradicts itself and a script that ignores
its argument."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpulab.grading import StepFailed, scripts
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.grading.scripts.verdicts import expect_fails_closed, expect_uses_its_argument
from pytest_gpulab.sandbox import confine
from pytest_gpulab.sandbox.runner import ScriptResult

SANDBOX = confine.probe()
READER = "#!/bin/sh\nkubectl get nodes -o name || exit 2\n"
WRITER = "#!/bin/sh\nkubectl get nodes -o name\nkubectl cordon lab-node-1\nkubectl label node lab-node-2 x=y\necho OK\n"


@pytest.fixture
def runner(tmp_path: Path, gpuop_cluster) -> Iterator[ScriptRunner]:
    (root := tmp_path / "lab" / "bin").mkdir(parents=True)
    for name, text in (("reader", READER), ("writer", WRITER)):
        (root / name).write_text(text)
        (root / name).chmod(0o755)
    made = ScriptRunner(
        tmp_path / "work", 30.0, lambda: str(gpuop_cluster.kubeconfig), lab_root=root.parent, sandbox=SANDBOX
    )
    yield made
    made.close()


def result(stdout: str, exit_code: int | None, stderr: str = "") -> ScriptResult:
    return ScriptResult(
        ["x"], exit_code, stdout, stderr, timed_out=False, flooded=False, ran_with_bash=False, duration=0
    )


def test_each_run_s_refused_writes_are_its_own_though_runs_go_side_by_side(runner, gpuop_cluster):
    runs = runner.runs_of(runner.lab_root / "bin" / "writer")
    readers = runner.runs_of(runner.lab_root / "bin" / "reader")

    runs.ahead(scripts.Run(cluster=True))
    readers.ahead(scripts.Run(cluster=True), scripts.Run("again", cluster=True))
    wrote = runs.run(cluster=True).result
    assert {method for method, _ in wrote.writes} == {"PATCH"}, wrote
    assert {path.split("?")[0] for _, path in wrote.writes} == {"/api/v1/nodes/lab-node-1", "/api/v1/nodes/lab-node-2"}
    for args in ((), ("again",)):
        read = readers.run(*args, cluster=True).result
        assert read.exit_code == 0 and "node/lab-node-1" in read.stdout and read.writes == (), read
    assert not gpuop_cluster.get_json("node", "lab-node-1").get("spec", {}).get("unschedulable")
    with pytest.raises(StepFailed, match=r"tried to change the cluster \(PATCH /api/v1/nodes/lab-node-1 and PATCH"):
        scripts.expect_verdict(wrote, "bin/writer", "Run on the cluster", set(), prefix="BLOCKED")


@pytest.mark.parametrize(
    ("fault", "words"), [("unavailable", "ServiceUnavailable"), ("unreachable", "connection to the server")]
)
def test_a_failing_api_server_is_shown_at_once_and_an_all_clear_there_fails(runner, fault, words):
    reading = runner.run(runner.lab_root / "bin" / "reader", cluster=True, api=fault).result
    assert reading.exit_code == 2 and not reading.timed_out and words in reading.stderr, reading
    assert words in scripts.said(reading) or "refused" in scripts.said(reading), scripts.said(
        reading
    )  # kubectl's error, not its log
    expect_fails_closed(reading, "bin/reader", fault, prefix="BLOCKED")
    fail_open = runner.run(runner.lab_root / "bin" / "writer", cluster=True, api=fault).result
    with pytest.raises(StepFailed, match="reports success on what it could not read"):
        expect_fails_closed(fail_open, "bin/writer", fault, prefix="BLOCKED")


def test_findings_with_ok_contradict_themselves():
    both = result("MISSING=nvidia\nOK\n", 1)
    with pytest.raises(StepFailed, match="and OK too: a verdict that contradicts itself"):
        scripts.expect_verdict(both, "bin/check", "Given a dump", {"MISSING=nvidia"}, prefix="MISSING")
    right = result("MISSING=nvidia\n", 1)
    assert scripts.expect_verdict(right, "bin/check", "Given a dump", {"MISSING=nvidia"}, prefix="MISSING").findings


def test_one_expected_finding_is_not_asked_for_each_once():
    with pytest.raises(StepFailed) as failed:
        scripts.expect_verdict(result("", 0), "bin/check", "Given a dump", {"MISSING=nvidia"}, prefix="MISSING")
    assert "each once" not in failed.value.message
    assert "print MISSING=nvidia and exit 1" in failed.value.message


def test_the_same_output_for_arguments_whose_answers_differ_is_an_ignored_argument():
    same = {"ns-a": result("MISSING=x\n", 1), "ns-b": result("MISSING=x\n", 1)}
    with pytest.raises(StepFailed, match="ignores its argument"):
        expect_uses_its_argument("bin/ds-coverage.sh", same)
    expect_uses_its_argument("bin/ds-coverage.sh", {"ns-a": result("MISSING=x\n", 1), "ns-b": result("OK\n", 0)})


def test_said_skips_kubectl_s_log_lines_for_its_error():
    stderr = (
        'E1204 10:51:21.230350      10 memcache.go:265] "Unhandled Error"\nError from server (ServiceUnavailable)\n'
    )
    assert scripts.said(result("", 1, stderr)) == " (it said: Error from server (ServiceUnavailable))"


def test_at_least_these_kinds_lets_a_gate_block_on_a_reason_of_its_own():
    """The lab asks for at least mcp/, node/ and taint/ reasons: one more, of another kind, is the gate's own."""
    kinds = ("mcp/", "node/", "taint/")
    more = result("BLOCKED=mcp/worker\nBLOCKED=allocatable/lab-node-2\n", 1)
    scripts.expect_verdict(more, "bin/preflight.sh", "Run now", {"BLOCKED=mcp/worker"}, prefix="BLOCKED", kinds=kinds)
    with pytest.raises(StepFailed, match="BLOCKED=allocatable"):  # read as exactly, it would be an invented one
        scripts.expect_verdict(more, "bin/preflight.sh", "Run now", {"BLOCKED=mcp/worker"}, prefix="BLOCKED")
    wrong_kind = result("BLOCKED=mcp/worker\nBLOCKED=node/lab-node-1\n", 1)
    with pytest.raises(StepFailed, match="node/lab-node-1"):  # a listed kind must still be exact
        scripts.expect_verdict(
            wrong_kind, "bin/preflight.sh", "Run now", {"BLOCKED=mcp/worker"}, prefix="BLOCKED", kinds=kinds
        )
    with pytest.raises(StepFailed, match="still block"):
        scripts.expect_verdict(result("BLOCKED=allocatable/x\n", 0), "bin/preflight.sh", "Run now", set(), prefix="BLOCKED",
                       kinds=kinds)  # fmt: skip
