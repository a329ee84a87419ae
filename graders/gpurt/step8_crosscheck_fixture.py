"""Step 8: a dump where only some handlers were loaded, and the checker's saved verdict on it."""

import pytest

from pytest_gpulab.grading import containerd, expect, k8s, listed, scripts

pytestmark = pytest.mark.step(8, "The checker on a partly loaded dump", points=10, needs=1)

FIXTURE = "fixtures/dump-node1.toml"
OUTPUT = "out/crosscheck.txt"


@pytest.fixture(scope="module")
def required(lab_cluster):
    return k8s.required_handlers(lab_cluster.live_or_fail(), made_by="step 1")


@pytest.fixture(scope="module")
def loaded(learner):
    return containerd.loaded_handlers(learner.file(FIXTURE).toml())


def test_fixture_plugin_names_match_its_version(learner):
    """A dump states its version; a containerd of that version loads runtimes only under that version's plugin."""
    containerd.expect_plugins_match_version(learner.file(FIXTURE).toml(), FIXTURE)


def test_fixture_is_a_partly_loaded_dump(loaded, required):
    expect(
        "runc" in loaded,
        f"{FIXTURE} should load runc, as every node does; it loads {listed(sorted(loaded)) or 'no runtime'}.",
    )
    expect(
        loaded & required - {"runc"},
        f"{FIXTURE} loads none of the handlers the cluster's RuntimeClasses ask for ({listed(sorted(required))}); "
        "a partly loaded node has some of them.",
    )
    expect(
        required - loaded,
        f"{FIXTURE} loads every handler the cluster asks for, so there is no mismatch to find; leave at least one out.",
    )


def test_saved_verdict(learner, loaded, required):
    scripts.expect_saved_verdict(
        learner.file(OUTPUT), {f"MISSING={handler}" for handler in required - loaded}, prefix="MISSING",
        why=f"what {FIXTURE} lacks of the cluster's handlers",
        detail={"required": sorted(required), "loaded": sorted(loaded)},
    )  # fmt: skip
