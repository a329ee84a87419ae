"""Step 8: stall the rollout and report the split state."""

import re

import pytest

from pytest_gpulab.feedback import Words, expect, expect_value, fail, should_be, shown
from pytest_gpulab.live import owned_by
from pytest_gpulab.parsing import dig, quantity_bytes

pytestmark = pytest.mark.step(8, "Stalled DaemonSet rollout", points=15)

DS = "gpu-operator/nvidia-container-toolkit"
FILE = "k8s/toolkit-ds.yaml"
REPORT = "out/rollout.txt"
FIRST, CHANGED = ("v1.16.2", 128 * 2**20), ("v1.17.0", 64 * 2**30)  # (image tag, memory request): applied, then changed
STATUS_WAIT_SECONDS = 20
PUSHED_TOO_EARLY_HINT = (
    "Common mistake 3: the new spec was pushed before the three v1.16.2 Pods were Ready, so every Pod was "
    "replaced and none is ready. Delete the DaemonSet, apply v1.16.2/128Mi, wait until 3 are Ready, then change both."
)
TWO_EDITS_HINT = "Change the image and the memory request in one edit: delete the DaemonSet, apply v1.16.2/128Mi, wait until 3 are Ready, then change both at once."


def memory_of(obj):
    return dig(obj, "spec", "template", "spec", "containers", 0, "resources", "requests", "memory")


def spec_of(obj):
    """(image tag, memory request in bytes) of a Pod's or a DaemonSet's first container."""
    containers = dig(obj, "spec", "containers") or dig(obj, "spec", "template", "spec", "containers")
    image = dig(containers, 0, "image")
    tag = image.rsplit(":", 1)[-1] if isinstance(image, str) and "container-toolkit:" in image else image
    return tag, quantity_bytes(dig(containers, 0, "resources", "requests", "memory"))


def expected_stall(lab):
    """Every node runs the DaemonSet; maxUnavailable 1 lets exactly one Pod be replaced."""
    nodes = len(lab.nodes)
    return {"desired": nodes, "updated": 1, "ready": nodes - 1, "old": nodes - 1}


def numbers(ds):
    status = ds.get("status", {})
    return {
        "desired": status.get("desiredNumberScheduled"),
        "updated": status.get("updatedNumberScheduled", 0),
        "ready": status.get("numberReady", 0),
    }


def stalled(ds, lab):
    return ds is not None and numbers(ds) == {key: value for key, value in expected_stall(lab).items() if key != "old"}


@pytest.fixture(scope="module")
def settled(lab_cluster, lab):
    """The live DaemonSet once its status has settled (a bounded wait), or None if it is not there."""
    live = lab_cluster.live_or_fail()
    ds = live.get("DaemonSet", DS)
    if ds is not None and not stalled(ds, lab):
        ds = live.wait_for("DaemonSet", DS, lambda d: stalled(d, lab), STATUS_WAIT_SECONDS) or ds
    return ds


@pytest.fixture
def daemonset(settled):
    expect(settled, f"The DaemonSet {DS} is not in the cluster; apply {FILE}.")
    return settled


def test_daemonset_spec(learner, settled):
    written = learner.file(FILE).object("DaemonSet", "nvidia-container-toolkit")
    daemonset = settled
    expect_value(dig(written, "metadata", "namespace"), "gpu-operator", f"{FILE}: the DaemonSet's namespace")
    max_unavailable = dig(written, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
    expect(
        str(max_unavailable) == "1",
        should_be(f"{FILE}: updateStrategy.rollingUpdate.maxUnavailable", 1, max_unavailable),
    )
    expect(
        spec_of(written) in (FIRST, CHANGED),
        f"{FILE} should hold either the first spec (v1.16.2, 128Mi) or the changed one (v1.17.0, 64Gi); "
        f"found image {shown(spec_of(written)[0])}, memory {shown(memory_of(written))}.",
    )
    expect(daemonset, f"The DaemonSet {DS} is not in the cluster; apply {FILE}.")
    max_unavailable = dig(daemonset, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
    expect(
        str(max_unavailable) == "1",
        should_be("In the cluster: updateStrategy.rollingUpdate.maxUnavailable", 1, max_unavailable),
    )
    tag, memory = spec_of(daemonset)
    expect_value(tag, CHANGED[0], "The DaemonSet's image tag in the cluster")
    expect(
        memory == CHANGED[1],
        should_be("The DaemonSet's memory request in the cluster", Words("64Gi"), memory_of(daemonset)),
    )


def pods_of(live, ds):
    return owned_by(live.list("Pod", "gpu-operator", labels=dig(ds, "spec", "selector", "matchLabels")), ds)


def test_rollout_stalled_on_memory(live, lab, daemonset):
    revisions = owned_by(
        live.list("ControllerRevision", "gpu-operator", labels=dig(daemonset, "spec", "selector", "matchLabels")),
        daemonset,
    )
    expect(
        len(revisions) >= 2,
        f"The DaemonSet has {len(revisions)} revision(s); it should have been applied with v1.16.2/128Mi first and then changed.",
        hint="Apply the v1.16.2 spec, wait for 3 Ready Pods, then change image and memory together.",
    )
    pods = pods_of(live, daemonset)
    detail = {
        "status": daemonset.get("status"),
        "pods": [
            {"name": dig(p, "metadata", "name"), "spec": spec_of(p), "phase": dig(p, "status", "phase")} for p in pods
        ],
    }
    found, wanted = numbers(daemonset), expected_stall(lab)
    if found["ready"] == 0 and found["updated"] == found["desired"]:
        fail(f"The rollout replaced every Pod and none is ready ({found}).", hint=PUSHED_TOO_EARLY_HINT, detail=detail)
    expect(
        stalled(daemonset, lab),
        f"The rollout should stall at desired {wanted['desired']}, updated 1, ready {wanted['ready']}; found desired {found['desired']}, updated {found['updated']}, ready {found['ready']}.",
        detail=detail,
    )
    not_replaced = [p for p in pods if spec_of(p) != CHANGED]
    if not_replaced and all(spec_of(p)[0] == CHANGED[0] for p in not_replaced):
        fail(
            f"The {len(not_replaced)} Pods that were not replaced already run v1.17.0 with 128Mi: the image and the memory were changed in two edits, so the first rolled v1.17.0 out everywhere before the second stalled.",
            hint=TWO_EDITS_HINT,
            detail=detail,
        )
    old = [p for p in not_replaced if spec_of(p) == FIRST]
    expect(
        len(old) == wanted["old"], f"{wanted['old']} Pods should still run v1.16.2, found {len(old)}.", detail=detail
    )
    pending = [p for p in pods if spec_of(p) == CHANGED and pending_on_memory(p)]
    expect(
        len(pending) == 1,
        f"One new Pod should be Pending with Insufficient memory; found {len(pending)}.",
        detail=detail,
    )


def pending_on_memory(pod):
    conditions = dig(pod, "status", "conditions", default=[]) or []
    return dig(pod, "status", "phase") == "Pending" and any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and "Insufficient memory" in (c.get("message") or "")
        for c in conditions
    )


def test_rollout_report(learner, live, daemonset):
    values = learner.file(REPORT).key_values(
        "DESIRED", "UPDATED", "READY", "OLD_IMAGE_PODS", "MAX_UNAVAILABLE", "BLOCKER"
    )
    found = numbers(daemonset)
    live_numbers = {
        "DESIRED": found["desired"],
        "UPDATED": found["updated"],
        "READY": found["ready"],
        "OLD_IMAGE_PODS": sum(spec_of(p)[0] == FIRST[0] for p in pods_of(live, daemonset)),
        "MAX_UNAVAILABLE": dig(daemonset, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable"),
    }
    wrong = [
        should_be(key, Words(str(number)), values[key], why="as the live DaemonSet shows")
        for key, number in live_numbers.items()
        if values[key].strip() != str(number)
    ]
    blocker = re.sub(r"[\s_]+", "-", values["BLOCKER"].strip().lower())
    if blocker != "insufficient-memory":
        wrong.append(should_be("BLOCKER", Words("insufficient-memory"), values["BLOCKER"]))
    expect(not wrong, f"{REPORT}: " + " ".join(wrong), detail={"written": values, "live": live_numbers})
