"""No cluster outlives its grader (cluster/reaper.py), on real lab clusters: a grader killed by SIGKILL or SIGTERM,
while its cluster runs or while kwokctl still creates it, and a `gpulab grade-batch` killed mid-run, leave no
process naming a cluster's work directory and no cluster folder; a leftover whose watchdog was killed too is
reaped by the next start's sweep; `gpulab up`'s cluster outlives the command, with no watchdog.

Each grader here runs with a temporary directory of its own (TMPDIR), so its clusters' folders are found there
and only processes naming them are looked at, or signalled when a test fails: never another's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import running_commands

from pytest_gpulab.cluster import reaper, snapshot
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import write_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.labs.waiting import wait_until

GRADER = """
import sys
from pytest_gpulab.cluster.kwok import KwokCluster
cluster = KwokCluster("tests-reaped").start()
print("up", flush=True)
sys.stdin.read()
"""


def naming(text: str) -> dict[int, str]:
    return {pid: command for pid, command in running_commands().items() if text in command}


def cluster_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(f"{reaper.WORKDIR_PREFIX}*"))


def gone(tmp: Path) -> bool:
    """No process names a cluster folder under ``tmp``, and none of those folders is left."""
    return not naming(f"{tmp}/{reaper.WORKDIR_PREFIX}") and not cluster_folders(tmp)


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    """The graders' TMPDIR; whatever the test does, what runs from it is stopped at the end."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    yield folder
    for workdir in cluster_folders(folder):
        reaper.reap(workdir, {"cluster_dir": str(workdir / "clusters"), "remove_workdir": True})


def grader(tmp: Path, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command or [sys.executable, "-c", GRADER], env={**os.environ, "TMPDIR": str(tmp)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def killed(process: subprocess.Popen[str], signum: int) -> None:
    process.send_signal(signum)
    process.wait(timeout=30)
    assert process.returncode == -signum


def components(text: str) -> dict[int, str]:
    """The cluster components naming ``text``: kwokctl runs each from its cluster folder's bin/ (and each binary
    there with --version first, which ends at once)."""
    found = naming(text).items()
    return {pid: line for pid, line in found if "/clusters/" in line.split(" ")[0] and " --version" not in line}


def components_of(tmp: Path) -> dict[int, str]:
    return components(f"{tmp}/{reaper.WORKDIR_PREFIX}")


def creating(tmp: Path) -> bool:
    """Whether kwokctl is creating a cluster in a folder under ``tmp``."""
    return any("kwokctl" in command for command in naming(f"{tmp}/{reaper.WORKDIR_PREFIX}").values())


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_grader_killed_leaves_no_cluster(tmp, signum):
    process = grader(tmp)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "up\n"
        assert len(components_of(tmp)) == 5, naming(str(tmp))
        killed(process, signum)
        assert wait_until(lambda: gone(tmp), 60, interval=0.1), (naming(str(tmp)), cluster_folders(tmp))
    finally:
        process.kill()


def test_a_grader_killed_while_kwokctl_creates_its_cluster_leaves_none(tmp):
    process = grader(tmp)
    try:
        assert wait_until(lambda: creating(tmp), 60, interval=0.01)
        killed(process, signal.SIGKILL)
        assert wait_until(lambda: gone(tmp), 60, interval=0.1), (naming(str(tmp)), cluster_folders(tmp))
    finally:
        process.kill()


def test_a_leftover_whose_watchdog_was_killed_too_is_reaped_by_the_next_sweep(tmp):
    process = grader(tmp)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "up\n"
        [workdir] = cluster_folders(tmp)
        [watchdog] = [pid for pid, command in naming(str(workdir / reaper.RECORD)).items() if reaper.SCRIPT in command]
        os.kill(watchdog, signal.SIGKILL)
        killed(process, signal.SIGKILL)
        assert len(components_of(tmp)) == 5  # nothing stops them now
        assert reaper.sweep(tmp) == [workdir]  # what KwokCluster.start does first, here on the graders' TMPDIR
        assert wait_until(lambda: gone(tmp), 60, interval=0.1), (naming(str(tmp)), cluster_folders(tmp))
    finally:
        process.kill()


def test_a_live_graders_cluster_is_no_leftover(tmp_path):
    """Not while its watchdog holds the record, nor while its grader lives (its watchdog killed)."""
    workdir = tmp_path / f"{reaper.WORKDIR_PREFIX}given"  # a folder the sweep looks at
    with KwokCluster("tests-not-left", workdir=workdir) as cluster:
        record = json.loads((workdir / reaper.RECORD).read_text())
        assert record["pid"] == os.getpid()
        assert not record["remove_workdir"]
        assert reaper.sweep(tmp_path) == []
        assert cluster._watchdog is not None
        cluster._watchdog.process.kill()
        cluster._watchdog.process.wait()
        assert reaper.sweep(tmp_path) == []
        assert cluster.is_running()
    assert not (workdir / reaper.RECORD).exists()
    assert not cluster.cluster_dir.exists()
    assert wait_until(lambda: not naming(str(workdir)), 60), naming(str(workdir))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two gpuop bundles of an untouched lab root: grading them starts a cluster for each."""
    folder = tmp_path_factory.mktemp("bundles")
    root = tmp_path_factory.mktemp("root")
    with KwokCluster.for_lab("gpuop", name="tests-bundled") as cluster:
        for learner in ("a-learner", "b-learner"):
            write_bundle(discover().get("gpuop"), root, cluster, folder / f"{learner}.gpulab.tar.gz", learner=learner)
    return folder


def test_a_batch_killed_mid_run_leaves_no_cluster(tmp, tmp_path, bundles):
    gpulab = str(Path(sys.executable).with_name("gpulab"))
    process = grader(tmp, gpulab, "grade-batch", str(bundles), "--jobs", "2", "--out", str(tmp_path / "out"))
    try:
        # a grading cluster runs etcd and the API server (snapshot.FROZEN)
        assert wait_until(lambda: len(components_of(tmp)) >= 2 or process.poll() is not None, 120, interval=0.05)
        assert process.poll() is None, "the batch ended before a grading cluster ran"
        killed(process, signal.SIGKILL)
        assert wait_until(lambda: gone(tmp), 60, interval=0.1), (naming(str(tmp)), cluster_folders(tmp))
    finally:
        process.kill()


def test_gpulab_ups_cluster_outlives_the_command_with_no_watchdog(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path / "cache"))
    command = [sys.executable, "-m", "pytest_gpulab.cli"]
    try:
        up = subprocess.run([*command, "up", "gpuop"], capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stderr
        cache = str(tmp_path / "cache")
        assert not [command for command in naming(cache).values() if reaper.SCRIPT in command]
        assert not list((tmp_path / "cache").rglob(reaper.RECORD))
        assert len(components(cache)) == 5
        assert "already up" in subprocess.run([*command, "up", "gpuop"], capture_output=True, text=True).stderr
    finally:
        subprocess.run([*command, "down", "gpuop"], capture_output=True, timeout=300)


HANDING_OVER = """
import sys
from pathlib import Path
from pytest_gpulab.cluster import handover, toolchain
real = handover._run
def run(command, cwd, what):
    if what == "delete the node leases":  # etcd serves the snapshot: be killed here
        print("serving", flush=True)
        sys.stdin.read()
    return real(command, cwd, what)
handover._run = run
handover.without_node_leases(Path(sys.argv[1]), toolchain.bin_dir())
"""


def test_a_grader_killed_while_it_rewrites_a_snapshot_leaves_no_etcd(tmp, tmp_path):
    """The etcd that drops a snapshot's node leases (cluster/handover.py) ends with its grader, as a cluster does."""
    saved = tmp_path / "solved.db"
    with KwokCluster.for_lab("gpuop", name="tests-handover") as cluster:
        snapshot.save(cluster, saved)
    process = grader(tmp, sys.executable, "-c", HANDING_OVER, str(saved))
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "serving\n"
        assert any("etcd" in command for command in naming(f"{tmp}/{reaper.WORKDIR_PREFIX}").values())
        killed(process, signal.SIGKILL)
        assert wait_until(lambda: gone(tmp), 60, interval=0.1), (naming(str(tmp)), cluster_folders(tmp))
    finally:
        process.kill()
