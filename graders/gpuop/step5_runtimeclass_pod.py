"""Step 5: the RuntimeClass, the GPU Pod, and Pending."""

import re

import pytest

from pytest_gpulab.feedback import expect, fail, shown
from pytest_gpulab.parsing import dig, find_object, first_lines, load_yaml_documents, read_text

pytestmark = pytest.mark.step(5, "RuntimeClass, GPU Pod and the Unschedulable reason", points=15)

RUNTIMECLASS_FILE = "k8s/runtimeclass.yaml"
LABEL = re.compile(r"^(reason|message)(?:\s*[:=]\s*|\s+)", re.I)  # "reason: Unschedulable", "reason Unschedulable"


def read_reason_and_message(lines):
    """The two lines as (reason, message): by their labels if they carry them, else in order."""
    found = {}
    for position, line in enumerate(lines):
        label = LABEL.match(line)
        key = label.group(1).lower() if label else ("reason", "message")[position]
        found.setdefault(key, LABEL.sub("", line, count=1) if label else line)
    reason = re.sub(r"\s+#.*$", "", found.get("reason", "")).strip().strip("\"'")
    return reason, found.get("message", "")
POD_FILE = "k8s/gpu-pod.yaml"


def gpu_limit(pod):
    """The nvidia.com/gpu limit of the Pod's containers, as a string ("1"), or None."""
    containers = dig(pod, "spec", "containers")
    for container in containers if isinstance(containers, list) else []:
        limit = dig(container, "resources", "limits", "nvidia.com/gpu")
        if limit is not None:
            return str(limit)
    return None


def check_runtimeclass(runtimeclass, where):
    expect(runtimeclass is not None, f"{where}: no RuntimeClass named nvidia.")
    api_version = runtimeclass.get("apiVersion")
    expect(api_version == "node.k8s.io/v1", f"{where}: the RuntimeClass apiVersion should be node.k8s.io/v1, found {shown(api_version)}.")
    handler = runtimeclass.get("handler")
    if handler is None and dig(runtimeclass, "spec", "handler") is not None:
        fail(f"{where}: handler is under spec.", hint="A RuntimeClass has no spec: handler is a top-level field, beside metadata.")
    expect(handler == "nvidia", f"{where}: the RuntimeClass handler should be nvidia, found {shown(handler)}.", detail=runtimeclass)


def check_pod(pod, where):
    expect(pod is not None, f"{where}: no Pod named cuda-probe.")
    namespace = dig(pod, "metadata", "namespace")
    expect(namespace == "gpu-lab", f"{where}: the Pod's namespace should be gpu-lab, found {shown(namespace)}.")
    runtime_class = dig(pod, "spec", "runtimeClassName")
    expect(runtime_class == "nvidia", f"{where}: spec.runtimeClassName should be nvidia, found {shown(runtime_class)}.", detail=pod)
    limit = gpu_limit(pod)
    expect(limit == "1", f"{where}: a container should have resources.limits nvidia.com/gpu: 1, found {shown(limit)}.", detail=pod)


def test_runtimeclass_pod_and_reason(lab_root, live, feedback):
    runtimeclass = find_object(load_yaml_documents(lab_root / RUNTIMECLASS_FILE, RUNTIMECLASS_FILE), "RuntimeClass", "nvidia")
    check_runtimeclass(runtimeclass, RUNTIMECLASS_FILE)
    if dig(runtimeclass, "metadata", "namespace"):
        feedback.note(
            f"{RUNTIMECLASS_FILE} gives the RuntimeClass a namespace; a RuntimeClass is cluster-scoped, "
            "so the API server ignores it. Leave it out."
        )
    check_pod(find_object(load_yaml_documents(lab_root / POD_FILE, POD_FILE), "Pod", "cuda-probe"), POD_FILE)

    expect(live.get("/api/v1/namespaces/gpu-lab"), "The namespace gpu-lab does not exist in the cluster; create it first.")
    live_runtimeclass = live.get("/apis/node.k8s.io/v1/runtimeclasses/nvidia")
    expect(live_runtimeclass, f"The RuntimeClass nvidia is not in the cluster; apply {RUNTIMECLASS_FILE}.")
    check_runtimeclass(live_runtimeclass, "In the cluster")
    live_pod = live.get("/api/v1/namespaces/gpu-lab/pods/cuda-probe")
    expect(live_pod, f"The Pod gpu-lab/cuda-probe is not in the cluster; apply {POD_FILE}.")
    check_pod(live_pod, "In the cluster")

    display = "out/unscheduled.txt"
    lines = first_lines(read_text(lab_root / display, display), 2)
    expect(len(lines) == 2, f"{display} should have two lines (the PodScheduled reason, then its message), found {len(lines)}.")
    reason, message = read_reason_and_message(lines)
    expect(reason == "Unschedulable", f"Line 1 of {display} should be the reason Unschedulable, found {shown(reason)}.")
    expect(
        "Insufficient nvidia.com/gpu" in message and "0/3 nodes are available" in message,
        f"Line 2 of {display} should be the scheduler's message (\"0/3 nodes are available: 3 Insufficient nvidia.com/gpu...\"), found {shown(message)}.",
        hint="Copy the message of the PodScheduled condition: kubectl get pod cuda-probe -n gpu-lab -o jsonpath='{.status.conditions}'.",
    )
