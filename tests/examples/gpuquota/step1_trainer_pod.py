"""Step 1: a training Pod that asks for one GPU and tolerates the GPU node's taint."""

import pytest

from pytest_gpulab.grading import dig, expect, expect_value, k8s, should_be

pytestmark = pytest.mark.step(1, "Training Pod on the GPU node", points=10)

POD = "k8s/trainer.yaml"


def check_trainer(pod):
    # What the Pod asks for, in any spelling (1, "1", 1000m), from its requests or, where it sets none, its limits.
    gpus = k8s.effective_request(pod, "nvidia.com/gpu")
    expect(gpus == 1, should_be("the GPUs the Pod asks for", 1, dig(pod, "spec", "containers", 0, "resources")))
    tolerated = {t.get("key") for t in dig(pod, "spec", "tolerations", default=[]) or []}
    expect("dedicated" in tolerated, "the Pod should tolerate the dedicated=gpu taint.")


def test_trainer_written_and_applied(learner, live):
    k8s.written_and_applied(learner.file(POD), live, "Pod", "team-a/trainer", check_trainer)


def test_trainer_runs_on_the_gpu_node(live):
    pod = live.wait_for("Pod", "team-a/trainer", lambda p: dig(p, "status", "phase") == "Running", timeout=20)
    expect_value(dig(pod, "spec", "nodeName"), "gpu-node", "the node the trainer runs on")
