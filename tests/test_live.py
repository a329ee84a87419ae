"""LiveCluster: read-only, and a cluster that stops answering fails the step with a sentence."""

import pytest

from pytest_gpulab.feedback import StepFailed
from pytest_gpulab.live import LiveCluster


def test_reads_objects_and_says_none_for_a_missing_one(gpuop_cluster):
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    assert live.probe().startswith("v1.36.")
    assert live.get("/api/v1/nodes/lab-node-0")["metadata"]["name"] == "lab-node-0"
    assert live.get("/api/v1/nodes/no-such-node") is None
    assert {n["metadata"]["name"] for n in live.list("/api/v1/nodes", labelSelector="kubernetes.io/hostname=lab-node-1")} == {"lab-node-1"}
    assert not [name for name in dir(live) if name.startswith(("create", "patch", "delete", "put", "post", "replace"))]


def test_a_cluster_that_stopped_answering_fails_the_step(tmp_path):
    from pytest_gpulab.kwok import KwokCluster

    with KwokCluster.for_lab("gpuop", name="tests-vanishing", workdir=tmp_path / "kwok") as cluster:
        live = LiveCluster.from_kubeconfig(str(cluster.kubeconfig))
        live.probe()
    with pytest.raises(StepFailed, match=r"The lab cluster did not answer \(.+\) when the grader read /api/v1/nodes/lab-node-0"):
        live.get("/api/v1/nodes/lab-node-0")
