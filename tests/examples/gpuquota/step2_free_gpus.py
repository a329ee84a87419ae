"""Step 2: how many GPUs are left for the team, read from the cluster."""

import pytest
from _kit import free_gpus

from pytest_gpulab.grading import expect_value

pytestmark = pytest.mark.step(2, "GPUs left", points=5)


def test_free_gpus(learner, live):
    written = learner.file("out/free.txt").key_values("FREE_GPUS")["FREE_GPUS"]
    expect_value(
        written,
        str(free_gpus(live)),
        "FREE_GPUS in out/free.txt",
        why="the team's quota minus the GPUs its Pods ask for",
    )
