"""Step 2: how many GPUs are left for the team, read from the cluster."""

import pytest

from pytest_gpulab.grading import dig, expect_value

pytestmark = pytest.mark.step(2, "GPUs left", points=5)


def test_free_gpus(learner, live):
    quota = int(dig(live.get("ConfigMap", "team-a/quota"), "data", "gpus"))
    written = learner.file("out/free.txt").key_values("FREE_GPUS")["FREE_GPUS"]
    expect_value(written, str(quota - 1), "FREE_GPUS in out/free.txt", why="the team's quota minus the trainer's GPU")
