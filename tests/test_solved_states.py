"""A self-test row that changes the cluster starts from the reference solved once, restored into a fresh cluster of
its own (pytest_gpulab/selftest/solved.py): the same objects and files, its own cluster, and a kwok that runs
its nodes at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs.discovery import discover
from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.selftest.solved import SolvedStates
from pytest_gpulab.selftest.state import learner_files

EXAMPLES = Path(__file__).resolve().parent / "examples"
LAB = discover([EXAMPLES]).get("gpuquota")


def holders(cluster: KwokCluster) -> set[str]:
    leases = cluster.get_json("leases", "-n", "kube-node-lease")["items"]
    return {lease["spec"]["holderIdentity"] for lease in leases}


def phase(cluster: KwokCluster, pod: str) -> str:
    return cluster.kubectl("get", "pod", pod, "-n", "team-a", "-o", "jsonpath={.status.phase}", check=False).stdout


def test_a_row_starts_on_the_solved_state_in_a_cluster_of_its_own(tmp_path):
    names = iter(f"tests-solved-{n}" for n in range(1, 10))
    states = SolvedStates(tmp_path, lambda: next(names))
    assert states.claim(None) and not states.claim(None)
    root = tmp_path / "reference"
    with KwokCluster.for_lab(LAB, name="tests-solving") as solved:
        command = ["bash", str(LAB.reference), str(root)]
        subprocess.run(command, env=solved.environment(), check=True, capture_output=True, timeout=300)
        states.keep(None, solved, root)
        states.release(None)
        row = states.restored_cluster(None, tmp_path / "row", "test")
        assert row is not None
        try:
            assert row.kubeconfig != solved.kubeconfig
            assert learner_files(tmp_path / "row").keys() == learner_files(root).keys()
            assert phase(row, "trainer") == "Running"
            assert holders(row).isdisjoint(holders(solved)), "the restored kwok holds its nodes' leases itself"
            node = row.get_json("nodes")["items"][0]["metadata"]["name"]
            pinned = json.dumps({"spec": {"nodeName": node}})
            row.kubectl("run", "extra", "-n", "team-a", "--image=registry.example/x:1", f"--overrides={pinned}")
            assert wait_until(lambda: phase(row, "extra") == "Running", 60), "kwok runs a new Pod on a restored node"
            row.kubectl("delete", "pod", "trainer", "-n", "team-a", "--wait=false")
            assert phase(solved, "trainer") == "Running" and phase(solved, "extra") == ""
        finally:
            row.stop()
        assert states.restored == 1
    states.claim((1,))
    states.keep((1,), solved, root)  # the cluster is stopped: nothing can be kept
    states.release((1,))
    assert states.restored_cluster((1,), tmp_path / "again", "test") is None
    assert states.restored_cluster((2,), tmp_path / "never", "test") is None  # no row claimed it
