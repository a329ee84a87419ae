"""`gpulab up/down` and the plugin's cluster choices, on real lab clusters."""

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from processes import processes_mentioning, running_commands

from pytest_gpulab.labs.waiting import wait_until


def gpulab(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "pytest_gpulab.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        env=env,
    )


@pytest.fixture
def isolated_cache(monkeypatch, tmp_path):
    """`gpulab up` state of this test's own; whatever the test does, its cluster is taken down."""
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    yield tmp_path / "cache"
    gpulab("down", "gpuop")


def test_up_is_found_by_the_grader_and_down_removes_it(pytester, isolated_cache, tmp_path):
    up = gpulab("up", "gpuop")
    assert up.returncode == 0, up.stderr
    kubeconfig = Path(shlex.split(up.stdout.split("export KUBECONFIG=")[1].splitlines()[0])[0])
    assert kubeconfig.is_file()
    assert str(tmp_path) in str(kubeconfig)
    assert "already up" in gpulab("up", "gpuop").stderr

    root = tmp_path / "empty-root"
    root.mkdir()
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--lab-root", str(root), "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"*cluster {kubeconfig}*", "*lab-node-0 does not advertise nvidia.com/gpu*"])

    # State that outlived its processes (a restart) is named, not mistaken for a running cluster.
    apiserver = next(
        pid for pid, command in running_commands().items() if "kube-apiserver" in command and str(tmp_path) in command
    )
    os.kill(apiserver, signal.SIGKILL)
    stale = gpulab("up", "gpuop")
    assert stale.returncode == 1
    assert "does not answer" in stale.stderr
    assert "gpulab down gpuop" in stale.stderr

    down = gpulab("down", "gpuop")
    assert down.returncode == 0, down.stderr
    assert not (tmp_path / "cache" / "clusters" / "gpuop").exists()
    assert wait_until(lambda: not processes_mentioning(str(tmp_path / "cache")), 60)


def test_ephemeral_cluster_is_fresh_and_gone_after_the_run(pytester, tmp_path, monkeypatch):
    # Its cluster's folder in a temporary directory of the run's own: other graders' clusters come and go.
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    root = tmp_path / "empty-root"
    root.mkdir()
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "--lab-root", str(root), "--lab-cluster", "ephemeral", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*a fresh ephemeral lab cluster*", "*lab-node-0 does not advertise nvidia.com/gpu*", "*total: 0/100 points*"]
    )
    assert not list((tmp_path / "tmp").glob("gpulab-kwok-*"))
    assert wait_until(lambda: not processes_mentioning(str(tmp_path / "tmp")), 60)


def test_the_version_is_the_project_s_one():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    shown = gpulab("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"gpulab {pyproject['project']['version']}"
