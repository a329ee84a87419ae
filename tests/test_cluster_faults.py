"""A lab cluster that stops answering in the middle of a grading: errors on the cluster steps, the rest graded."""

import json
import shlex

import pytest

from pytest_gpulab.cluster.kwok import KwokCluster

LAB_TOML = 'name = "mini"\ntitle = "Mini"\ndefault_root = "/nonexistent"\nrubric_version = "1"\n'
FILE_STEP = 'import pytest\npytestmark = pytest.mark.step({n}, "Files")\n\ndef test_files():\n    pass\n'
LIVE_STEP = """
import subprocess
import pytest
pytestmark = pytest.mark.step({n}, "Live")

def test_reads_a_node(live):
    {stop}live.get("Node", "lab-node-0")
"""


def test_a_cluster_stopped_mid_run_is_an_error_of_the_later_cluster_steps_only(pytester, tmp_path):
    with KwokCluster.for_lab("gpuop", name="tests-stopping", workdir=tmp_path / "kwok") as cluster:
        env = cluster.environment()
        stop = tmp_path / "stop-cluster.sh"
        exports = "".join(f"export {key}={shlex.quote(env[key])}\n" for key in ("PATH", "KWOK_WORKDIR"))
        stop.write_text(f"#!/bin/sh\n{exports}kwokctl stop cluster --name {cluster.name} >/dev/null 2>&1\n")
        stop.chmod(0o755)
        folder = pytester.mkdir("mini")
        (folder / "lab.toml").write_text(LAB_TOML)
        (folder / "step1_files.py").write_text(FILE_STEP.format(n=1))
        (folder / "step2_live.py").write_text(LIVE_STEP.format(n=2, stop=""))
        stopping = f"subprocess.run([{str(stop)!r}], check=True, timeout=60)\n    "
        (folder / "step3_live.py").write_text(LIVE_STEP.format(n=3, stop=stopping))
        (folder / "step4_live.py").write_text(LIVE_STEP.format(n=4, stop=""))
        (folder / "step5_files.py").write_text(FILE_STEP.format(n=5))
        report = tmp_path / "grading.json"
        graded = pytester.runpytest_subprocess(
            f"--lab-dir={folder}", f"--kubeconfig={cluster.kubeconfig}", f"--gpulab-report={report}"
        )
    assert graded.ret == pytest.ExitCode.TESTS_FAILED, graded.outlines[-20:]  # it ended as a grading with errors
    data = json.loads(report.read_text())
    assert [s["outcome"] for s in data["steps"]] == ["passed", "passed", "error", "error", "passed"]
    assert data["complete"] is True
    assert data["retry"] is True
    for step in data["steps"][2:4]:
        assert f"(kubeconfig {cluster.kubeconfig})" in step["message"]
        assert "did not answer" in step["message"]
        assert "Check that it is still running" in step["message"]
        # why: the stopped server reset or refused the connection, as a dead one does; no read waited out its
        # timeout (as on a silent server), and no step its time limit
        assert "timed out" not in step["message"], step["message"]
        assert "took longer than" not in step["message"], step["message"]
