"""Step 8: stall the rollout and report the split state."""

import re

import pytest

from pytest_gpulab.feedback import expect, fail, shown
from pytest_gpulab.parsing import dig, find_object, load_yaml_documents, quantity_bytes, read_key_values

pytestmark = pytest.mark.step(8, "Stalled DaemonSet rollout", points=15)

DS = "/apis/apps/v1/namespaces/gpu-operator/daemonsets/nvidia-container-toolkit"
NEW_IMAGE = "nvcr.io/nvidia/k8s/container-toolkit:v1.17.0"
NEW_IMAGE_END = "container-toolkit:v1.17.0"
OLD_TAG = ":v1.16.2"
REPORT = "out/rollout.txt"
FILE = "k8s/toolkit-ds.yaml"
STATUS_WAIT_SECONDS = 20
PUSHED_TOO_EARLY_HINT = (
    "Common mistake 3: the new spec was pushed before the three v1.16.2 Pods were Ready, so every Pod was "
    "replaced and none is ready. Delete the DaemonSet, apply v1.16.2/128Mi, wait until 3 are Ready, then change both."
)


def ds_pods(live, ds):
    uid = dig(ds, "metadata", "uid")
    pods = live.list("/api/v1/namespaces/gpu-operator/pods")
    return [p for p in pods if any(ref.get("uid") == uid for ref in dig(p, "metadata", "ownerReferences", default=[]) or [])]


def image_of(obj):
    """The first container's image of a Pod or a DaemonSet, or None."""
    containers = dig(obj, "spec", "containers") or dig(obj, "spec", "template", "spec", "containers")
    image = dig(containers, 0, "image")
    return image if isinstance(image, str) else None


def memory_request(ds):
    containers = dig(ds, "spec", "template", "spec", "containers")
    for container in containers if isinstance(containers, list) else []:
        request = dig(container, "resources", "requests", "memory")
        if request is not None:
            return str(request)
    return None


def is_pending_on_memory(pod):
    if dig(pod, "status", "phase") != "Pending":
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and "Insufficient memory" in (c.get("message") or "")
        for c in dig(pod, "status", "conditions", default=[]) or []
    )


def stall_numbers(ds):
    status = ds.get("status", {})
    return (status.get("desiredNumberScheduled"), status.get("updatedNumberScheduled", 0), status.get("numberReady", 0))


def check_file(lab_root):
    """The DaemonSet as written: the first spec or the changed one, whichever the file holds now."""
    daemonset = find_object(load_yaml_documents(lab_root / FILE, FILE), "DaemonSet", "nvidia-container-toolkit")
    expect(daemonset is not None, f"{FILE}: no DaemonSet named nvidia-container-toolkit.")
    namespace = dig(daemonset, "metadata", "namespace")
    expect(namespace == "gpu-operator", f"{FILE}: the DaemonSet's namespace should be gpu-operator, found {shown(namespace)}.")
    max_unavailable = dig(daemonset, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
    expect(str(max_unavailable) == "1", f"{FILE}: updateStrategy.rollingUpdate.maxUnavailable should be 1, found {shown(max_unavailable)}.")
    image, memory = image_of(daemonset) or "", quantity_bytes(memory_request(daemonset))
    first = image.endswith("container-toolkit:v1.16.2") and memory == 128 * 2**20
    changed = image.endswith(NEW_IMAGE_END) and memory == 64 * 2**30
    expect(
        first or changed,
        f"{FILE} should hold either the first spec (v1.16.2, 128Mi) or the changed one (v1.17.0, 64Gi); "
        f"found image {shown(image or None)}, memory {shown(memory_request(daemonset))}.",
    )


def test_stalled_rollout(lab_root, live):
    check_file(lab_root)
    ds = live.get(DS)
    expect(ds, f"The DaemonSet gpu-operator/nvidia-container-toolkit is not in the cluster; apply {FILE}.")
    max_unavailable = dig(ds, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable")
    expect(str(max_unavailable) == "1", f"updateStrategy.rollingUpdate.maxUnavailable should be 1, found {shown(max_unavailable)}.")
    image = image_of(ds)
    expect((image or "").endswith(NEW_IMAGE_END), f"The DaemonSet's image should now be {NEW_IMAGE}, found {shown(image)}.")
    memory = memory_request(ds)
    expect(quantity_bytes(memory) == 64 * 2**30, f"The DaemonSet's memory request should now be 64Gi, found {shown(memory)}.")

    uid = dig(ds, "metadata", "uid")
    revisions = [
        r for r in live.list("/apis/apps/v1/namespaces/gpu-operator/controllerrevisions")
        if any(ref.get("uid") == uid for ref in dig(r, "metadata", "ownerReferences", default=[]) or [])
    ]
    expect(
        len(revisions) >= 2,
        f"The DaemonSet has {len(revisions)} revision(s); it should have been applied with v1.16.2/128Mi first and then changed.",
        hint="Apply the v1.16.2 spec, wait for 3 Ready Pods, then change image and memory together.",
    )

    if stall_numbers(ds) != (3, 1, 2):  # the status may still be converging: wait, bounded
        ds = live.wait_for(DS, lambda d: d is not None and stall_numbers(d) == (3, 1, 2), STATUS_WAIT_SECONDS) or ds
    desired, updated, ready = stall_numbers(ds)
    pods = ds_pods(live, ds)
    old_pods = [p for p in pods if (image_of(p) or "").endswith(OLD_TAG)]
    pending = [p for p in pods if (image_of(p) or "").endswith(NEW_IMAGE_END) and is_pending_on_memory(p)]
    detail = {"status": ds.get("status"), "pods": [{"name": dig(p, "metadata", "name"), "image": image_of(p), "phase": dig(p, "status", "phase")} for p in pods]}
    if (desired, updated, ready) != (3, 1, 2):
        if ready == 0 and updated == desired:
            fail(f"The rollout replaced every Pod and none is ready (desired {desired}, updated {updated}, ready {ready}).", hint=PUSHED_TOO_EARLY_HINT, detail=detail)
        fail(f"The rollout should stall at desired 3, updated 1, ready 2; found desired {desired}, updated {updated}, ready {ready}.", detail=detail)
    expect(len(old_pods) == 2, f"Two Pods should still run v1.16.2, found {len(old_pods)}.", detail=detail)
    expect(len(pending) == 1, f"One new Pod should be Pending with Insufficient memory; found {len(pending)}.", detail=detail)

    values = read_key_values(lab_root / REPORT, REPORT, required=["DESIRED", "UPDATED", "READY", "OLD_IMAGE_PODS", "MAX_UNAVAILABLE", "BLOCKER"])
    live_numbers = {"DESIRED": desired, "UPDATED": updated, "READY": ready, "OLD_IMAGE_PODS": len(old_pods), "MAX_UNAVAILABLE": 1}
    for key, number in live_numbers.items():
        written = values[key].strip()
        expect(written == str(number), f"{REPORT}: {key} should be {number}, as the live DaemonSet shows; found {shown(values[key])}.", detail=detail)
    blocker = re.sub(r"[\s_]+", "-", values["BLOCKER"].strip().lower())
    expect(blocker == "insufficient-memory", f"{REPORT}: BLOCKER should be insufficient-memory, found {shown(values['BLOCKER'])}.")
