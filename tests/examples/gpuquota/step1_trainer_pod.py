"""Step 1: a training Pod that asks for one GPU and tolerates the GPU node's taint."""

import pytest

from pytest_gpulab.grading import dig, expect, expect_value, quantity_bytes, should_be, written_and_applied

pytestmark = pytest.mark.step(1, "Training Pod on the GPU node", points=10)

POD = "k8s/trainer.yaml"


def check_trainer(pod):
    limit = dig(pod, "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu")
    expect(quantity_bytes(limit) == 1, should_be("the GPU limit", 1, limit))  # a file may say 1, the API server "1"
    tolerated = {t.get("key") for t in dig(pod, "spec", "tolerations", default=[]) or []}
    expect("dedicated" in tolerated, "the Pod should tolerate the dedicated=gpu taint.")


def test_trainer_written_and_applied(learner, live):
    written_and_applied(learner.file(POD), live, "Pod", "team-a/trainer", check_trainer)


def test_trainer_runs_on_the_gpu_node(live):
    pod = live.wait_for("Pod", "team-a/trainer", lambda p: dig(p, "status", "phase") == "Running", timeout=20)
    expect_value(dig(pod, "spec", "nodeName"), "gpu-node", "the node the trainer runs on")
