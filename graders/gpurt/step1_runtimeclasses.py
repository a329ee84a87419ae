"""Step 1: the gpu-rt namespace and the two RuntimeClasses that choose a handler."""

import pytest

from pytest_gpulab.grading import expect, k8s

pytestmark = pytest.mark.step(1, "The namespace and two RuntimeClasses", points=10)

RUNTIMECLASSES = "k8s/runtimeclasses.yaml"


def test_namespace(live):
    expect(live.get("Namespace", "gpu-rt"), "The namespace gpu-rt does not exist in the cluster; create it.")


@pytest.mark.parametrize("name", ["nvidia", "nvidia-cdi"])
def test_runtimeclass(learner, live, name):
    k8s.written_and_applied(
        learner.file(RUNTIMECLASSES), live, "RuntimeClass", name, k8s.check_runtimeclass(handler=name)
    )
