"""Step 8: stall the rollout and report the split state."""

import pytest

from pytest_gpulab.grading import Words, answers, dig, expect, expect_value, fail, k8s, should_be, shown

pytestmark = pytest.mark.step(8, "Stalled DaemonSet rollout", points=15)

DS = "gpu-operator/nvidia-container-toolkit"
FILE = "k8s/toolkit-ds.yaml"
REPORT = "out/rollout.txt"
IMAGE = "nvcr.io/nvidia/k8s/container-toolkit"
FIRST, CHANGED = (
    (f"{IMAGE}:v1.16.2", 128 * 2**20),
    (f"{IMAGE}:v1.17.0", 64 * 2**30),
)  # applied, then changed in one edit
STATUS_WAIT_SECONDS = 20
REDO = "delete the DaemonSet, apply v1.16.2/128Mi, wait until 3 are Ready, then change both at once."
PUSHED_TOO_EARLY_HINT = (
    "Common mistake 3: the new spec was pushed before the three v1.16.2 Pods were Ready, so every Pod was "
    f"replaced and none is ready. To redo it, {REDO}"
)
TWO_EDITS_HINT = f"Change the image and the memory request in one edit: {REDO}"


def stall(lab):
    """Every node runs the DaemonSet; maxUnavailable 1 lets exactly one Pod be replaced."""
    return k8s.Rollout(desired=len(lab.nodes), updated=1, ready=len(lab.nodes) - 1)


def resources(ds):
    """The first container's resources as written: the memory may be a request, or a limit alone."""
    return dig(k8s.containers(ds), 0, "resources")


def max_unavailable(ds):
    return dig(ds, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")


def expect_rolling_update_by_one(ds, where):
    strategy = dig(ds, "spec", "updateStrategy", "type")
    expect(strategy in (None, "RollingUpdate"), should_be(f"{where}: updateStrategy.type", "RollingUpdate", strategy))
    expect_value(max_unavailable(ds), 1, f"{where}: updateStrategy.rollingUpdate.maxUnavailable")


def half_changed(spec):
    """A spec with one of the two changes made and the other still as it was first: the image and the memory were
    changed in two edits (a third value of either is a wrong value, which the spec's own check names)."""
    return tuple(spec) in ((CHANGED[0], FIRST[1]), (FIRST[0], CHANGED[1]))


@pytest.fixture(scope="module")
def settled(lab_cluster, lab):
    """The live DaemonSet once its status has settled (a bounded wait), or None if it is not there."""
    live = lab_cluster.live_or_fail()
    ds = live.get("DaemonSet", DS)
    if ds is not None and k8s.Rollout.of(ds) != stall(lab):
        ds = (
            live.wait_for(
                "DaemonSet", DS, lambda d: d is not None and k8s.Rollout.of(d) == stall(lab), STATUS_WAIT_SECONDS
            )
            or ds
        )
    return ds


@pytest.fixture
def daemonset(settled):
    expect(settled, f"The DaemonSet {DS} is not in the cluster; apply {FILE}.")
    return settled


def test_daemonset_spec(learner, live, settled):
    written = learner.file(FILE).object("DaemonSet", "nvidia-container-toolkit", applied_to="gpu-operator")
    expect_value(dig(written, "metadata", "namespace"), "gpu-operator", f"{FILE}: the DaemonSet's namespace")
    expect_rolling_update_by_one(written, FILE)
    image, _ = k8s.image_and_memory(written)
    expect(
        k8s.image_and_memory(written) in (FIRST, CHANGED),
        f"{FILE} should hold either the first spec ({FIRST[0]}, 128Mi) or the changed one ({CHANGED[0]}, 64Gi); "
        f"found image {shown(image)}, resources {shown(resources(written))}.",
    )
    if settled is None:
        k8s.not_applied(live, learner.file(FILE), "DaemonSet", DS, written)
    expect_rolling_update_by_one(settled, "In the cluster")
    image, memory = k8s.image_and_memory(settled)
    expect_value(image, CHANGED[0], "The DaemonSet's image in the cluster")
    expect(
        memory == CHANGED[1],
        should_be("The DaemonSet's memory request in the cluster", Words("64Gi"), resources(settled)),
    )


def test_rollout_stalled_on_memory(live, lab, daemonset):
    revisions = [k8s.image_and_memory(revision.get("data")) for revision in k8s.revisions_of(live, daemonset)]
    expect(
        len(revisions) >= 2,
        f"The DaemonSet has {len(revisions)} revision(s); it should have been applied with v1.16.2/128Mi first and then changed.",
        hint="Apply the v1.16.2 spec, wait for 3 Ready Pods, then change image and memory together.",
    )
    pods = k8s.pods_of(live, daemonset)
    detail = {
        "status": daemonset.get("status"),
        "revisions": revisions,
        "pods": {dig(p, "metadata", "name"): k8s.image_and_memory(p) for p in pods},
    }
    found, wanted = k8s.Rollout.of(daemonset), stall(lab)
    if found.ready == 0 and found.updated == found.desired:
        fail(f"The rollout replaced every Pod and none is ready ({found}).", hint=PUSHED_TOO_EARLY_HINT, detail=detail)
    if any(half_changed(spec) for spec in revisions):
        fail(
            "The DaemonSet had a spec with only one of the two changes: the image and the memory request were "
            "changed in two edits, not at the same time.",
            hint=TWO_EDITS_HINT, detail=detail,
        )  # fmt: skip
    expect(found == wanted, f"The rollout should stall at {wanted}; found {found}.", detail=detail)
    current = k8s.image_and_memory(daemonset)
    old = [p for p in pods if k8s.image_and_memory(p) == FIRST]
    expect(len(old) == wanted.ready, f"{wanted.ready} Pods should still run v1.16.2, found {len(old)}.", detail=detail)
    pending = [
        p for p in pods if k8s.image_and_memory(p) == current and k8s.unschedulable_because(p, "Insufficient memory")
    ]
    expect(
        len(pending) == 1,
        f"One new Pod should be Pending with Insufficient memory; found {len(pending)}.",
        detail=detail,
    )


NUMBERS = {"DESIRED": "desiredNumberScheduled", "UPDATED": "updatedNumberScheduled", "READY": "numberReady"}


def test_rollout_report(learner, live, daemonset):
    found = k8s.Rollout.of(daemonset)
    old_pods = sum(k8s.image_and_memory(p)[0] == FIRST[0] for p in k8s.pods_of(live, daemonset))
    shown_live = {
        "DESIRED": found.desired, "UPDATED": found.updated, "READY": found.ready,
        "OLD_IMAGE_PODS": old_pods, "MAX_UNAVAILABLE": max_unavailable(daemonset),
    }  # fmt: skip
    asked = {key: answers.word(str(value), why="as the live DaemonSet shows") for key, value in shown_live.items()}
    for key, field in NUMBERS.items():
        if isinstance(shown_live[key], int):
            hints = k8s.misread_numbers(daemonset, field)
            asked[key] = answers.number(shown_live[key], why="as the live DaemonSet shows", hints=hints)
    answers.expect_answers(
        learner.file(REPORT), {**asked, "BLOCKER": answers.phrase("insufficient-memory")}, detail=shown_live
    )
