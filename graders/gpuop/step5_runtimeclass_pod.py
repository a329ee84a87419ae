"""Step 5: the RuntimeClass, the GPU Pod, and Pending."""

import re

import pytest

from pytest_gpulab.grading import Words, answers, dig, expect, expect_value, k8s, should_be

pytestmark = pytest.mark.step(5, "RuntimeClass, GPU Pod and the Unschedulable reason", points=15)

RUNTIMECLASS = "k8s/runtimeclass.yaml"
POD = "k8s/gpu-pod.yaml"
UNSCHEDULED = "out/unscheduled.txt"
GPU = "nvidia.com/gpu"
LABEL = re.compile(r"^(reason|message)(?:\s*[:=]\s*|\s+)", re.I)  # "reason: Unschedulable", "reason Unschedulable"


def gpu_asks(pod):
    """What each container that asks for GPUs wrote: its nvidia.com/gpu limits and requests."""
    written = [{kind: dig(c, "resources", kind, GPU) for kind in ("limits", "requests")} for c in k8s.containers(pod)]
    return [
        {kind: amount for kind, amount in asks.items() if amount is not None} for asks in written if any(asks.values())
    ]


def check_pod(pod):
    expect_value(dig(pod, "metadata", "namespace"), "gpu-lab", "the Pod's namespace")
    expect_value(dig(pod, "spec", "runtimeClassName"), "nvidia", "spec.runtimeClassName", detail=pod)
    asks = gpu_asks(pod)
    expect(
        [answers.quantity_bytes(ask.get("limits")) for ask in asks] == [1],
        should_be(f"the Pod's resources.limits {GPU}", Words("1, in one container"), asks or None),
        detail=pod,
    )


def test_runtimeclass(learner, live, feedback):
    k8s.written_and_applied(
        learner.file(RUNTIMECLASS), live, "RuntimeClass", "nvidia", k8s.check_runtimeclass("nvidia")
    )
    if dig(learner.file(RUNTIMECLASS).object("RuntimeClass", "nvidia"), "metadata", "namespace"):
        feedback.note(
            f"{RUNTIMECLASS} gives the RuntimeClass a namespace; a RuntimeClass is cluster-scoped, so the API server ignores it. Leave it out."
        )


def test_gpu_pod(learner, live):
    expect(live.get("Namespace", "gpu-lab"), "The namespace gpu-lab does not exist in the cluster; create it first.")
    node = dig(learner.file(POD).object("Pod", "cuda-probe"), "spec", "nodeName")
    expect(
        node is None,
        f"{POD} sets spec.nodeName: {node}, which places the Pod without the scheduler, so it never waits for a GPU.",
        hint="Leave nodeName out: the scheduler must find a node with a free nvidia.com/gpu.",
    )
    k8s.written_and_applied(learner.file(POD), live, "Pod", "gpu-lab/cuda-probe", check_pod)
    # Judged live, after the API server's defaulting: a GPU limit alone is the request, in any spelling.
    pod = live.get("Pod", "gpu-lab/cuda-probe")
    expect(
        k8s.effective_request(pod, GPU) == 1,
        should_be(f"In the cluster, the {GPU} cuda-probe requests", Words("1"), gpu_asks(pod) or None),
        detail=pod,
    )


def reason_and_message(lines):
    """The two lines as (reason, message): by their labels if they carry them, else in order."""
    found: dict[str, str] = {}
    for position, line in enumerate(lines):
        label = LABEL.match(line)
        found.setdefault(
            label.group(1).lower() if label else ("reason", "message")[position], LABEL.sub("", line, count=1)
        )
    reason = re.sub(r"\s+#.*$", "", found.get("reason", "")).strip().strip("\"'")
    return reason, found.get("message", "")


EVENT_REASON_HINT = (
    "FailedScheduling is the reason of the scheduler's event; the step asks for the PodScheduled condition's "
    "reason, Unschedulable (kubectl get pod cuda-probe -n gpu-lab -o jsonpath='{.status.conditions}')."
)


def test_pending_reason(learner, lab):
    lines = learner.file(UNSCHEDULED).lines(2)
    expect(
        len(lines) == 2,
        f"{UNSCHEDULED} should have two lines (the PodScheduled reason, then its message), found {len(lines)}.",
    )
    reason, message = reason_and_message(lines)
    expect(
        reason == "Unschedulable",
        should_be(f"Line 1 of {UNSCHEDULED}", Words("the reason Unschedulable"), reason),
        hint=EVENT_REASON_HINT if reason.lower() == "failedscheduling" else None,
    )
    nodes = f"0/{len(lab.nodes)} nodes are available: {len(lab.nodes)} Insufficient nvidia.com/gpu"
    expect(
        nodes in message,
        should_be(
            f"Line 2 of {UNSCHEDULED}",
            Words(f'the scheduler\'s message ("{nodes}...")'),
            message,
        ),
        hint="Copy the message of the PodScheduled condition: kubectl get pod cuda-probe -n gpu-lab -o jsonpath='{.status.conditions}'."
        if not message.strip().startswith("0/")
        else None,
    )
