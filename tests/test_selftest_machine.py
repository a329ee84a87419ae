"""A self-test row whose lab cluster does not start: tried once more, then the machine's fault in one line,
counted apart from the rows that say the lab is wrong. The failed starts are real (a port another socket
holds), on real clusters."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import processes_mentioning

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.selftest.clusters import MachineError, started
from pytest_gpulab.selftest.judge import REFERENCE, START, Row, report_selftest


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        yield taken.getsockname()[1]


def clusters(tmp_path: Path, port: int, failing: int):
    """Clusters whose first ``failing`` cannot start: their API server's port is taken."""
    made: list[KwokCluster] = []

    def make() -> KwokCluster:
        index = len(made)
        made.append(
            KwokCluster.for_lab(
                "gpuop",
                name=f"tests-machine-{index}",
                workdir=tmp_path / f"kwok{index}",
                apiserver_port=port if index < failing else None,
            )
        )
        return made[-1]

    return make, made


def test_a_start_that_fails_once_is_tried_again(tmp_path, taken_port, monkeypatch):
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path / "cache"))
    make, made = clusters(tmp_path, taken_port, failing=1)
    cluster = started(make, "gpuop-reference")
    try:
        assert len(made) == 2
        assert cluster is made[1]
        assert cluster.kubectl("get", "node", "lab-node-0").returncode == 0
    finally:
        cluster.stop()
    assert not (tmp_path / "cache" / "selftest-logs").exists()  # nothing to keep: it started


def test_two_failed_starts_are_the_machine_s_in_one_line_with_the_log_kept(tmp_path, taken_port, monkeypatch):
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path / "cache"))
    make, made = clusters(tmp_path, taken_port, failing=2)
    with pytest.raises(MachineError) as failed:
        started(make, "gpuop-form x/y")
    said = str(failed.value)
    assert "\n" not in said
    assert said.startswith("the lab cluster did not start, twice (")
    log = Path(said.rsplit("its log: ", 1)[1])
    assert log.parent == tmp_path / "cache" / "selftest-logs"
    assert log.name.endswith("-gpuop-form-x-y.log")
    assert f"port {taken_port} is already in use" in log.read_text()
    assert "attempt 2:" in log.read_text()
    assert len(made) == 2
    assert not processes_mentioning(str(tmp_path))


def test_the_summary_tells_a_wrong_lab_from_a_machine_that_could_not_run_it():
    wrong = Row(REFERENCE, problems=["step 3 failed: should pass"])
    unrun = Row(START, error="the lab cluster did not start, twice (x); its log: /l", machine=True)
    out = io.StringIO()
    assert report_selftest("gpuop", [wrong, unrun], 1.0, 1, out) == 1
    summary = out.getvalue().strip().splitlines()[-1]
    assert "the lab is wrong in 1: reference" in summary
    assert "the machine could not run 1: untouched start" in summary
    assert "MACHINE" in out.getvalue()
