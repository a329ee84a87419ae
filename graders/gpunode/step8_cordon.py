"""Step 8: the taint removed, the node restored, the waiting update's cordon, and who a drain would evict."""

import pytest

from pytest_gpulab.grading import answers, blocked_unless, dig, expect, k8s

pytestmark = pytest.mark.step(8, "The taint removed, the node cordoned, the impact recorded", points=10, needs=3)

NODE = "lab-node-2"
NAMESPACE = "nvidia-gpu-operator"
DAEMONSETS = ("gpu-feature-discovery", "nvidia-device-plugin-daemonset")
REPORT = "out/impact.txt"
WAIT_SECONDS = 20
RESERVATION = "ai4dd-a100-reserved"


def test_node_restored_and_cordoned(live):
    node = live.get("Node", NODE)
    expect(node, f"The node {NODE} is not in the cluster.")
    left = [t.get("key") for t in k8s.taints(node) if t.get("key") == RESERVATION]
    expect(
        not left,
        f"{NODE} still carries the taint ai4dd-a100-reserved; remove it (kubectl taint node {NODE} ai4dd-a100-reserved-).",
    )
    capacity, allocatable = k8s.advertised(node, "nvidia.com/gpu")
    expect(
        (capacity, allocatable) == ("4", "4"),
        f'{NODE} should advertise nvidia.com/gpu "4" in capacity and allocatable again, found {capacity} and {allocatable}.',
        hint=f'kubectl patch node {NODE} --subresource=status, allocatable back to "4".',
    )
    expect(k8s.is_cordoned(node), f"{NODE} is not cordoned; the waiting update cordons it (kubectl cordon {NODE}).")


def wait_seconds(live, *, untainted):
    """How long the agents (``untainted``: they do not tolerate the reservation) or the job may take to get
    there: nothing to wait for on a node that is not back, with its four GPUs advertised."""
    node = live.get("Node", NODE)
    back = k8s.advertised(node, "nvidia.com/gpu") == ("4", "4")
    if untainted:
        back = back and not [t for t in k8s.taints(node) if t.get("key") == RESERVATION]
    return WAIT_SECONDS if back else 0


def test_agents_back_on_every_node(live, lab):
    everywhere, seconds = len(lab.environment.node_names), wait_seconds(live, untainted=True)
    wrong = []
    for name in DAEMONSETS:
        ds = live.wait_for(
            "DaemonSet", name, lambda d: d is not None and (k8s.Rollout.of(d).desired, k8s.Rollout.of(d).ready) == (everywhere, everywhere),
            seconds, namespace=NAMESPACE,
        )  # fmt: skip
        if ds is None:
            wrong.append(f"{name} is not in the cluster")
        elif (k8s.Rollout.of(ds).desired, k8s.Rollout.of(ds).ready) != (everywhere, everywhere):
            wrong.append(f"{name} has {k8s.Rollout.of(ds)}")
    expect(
        not wrong, f"Both DaemonSets should be back to desired {everywhere}, ready {everywhere}: {'; '.join(wrong)}."
    )


def test_reserved_job_runs(live):
    seconds = wait_seconds(live, untainted=False)
    pod = live.wait_for("Pod", "research/a100-job", lambda p: dig(p, "status", "phase") == "Running", seconds)
    blocked_unless(pod, "the Pod research/a100-job, which step 3 creates,")
    expect(
        dig(pod, "status", "phase") == "Running" and dig(pod, "spec", "nodeName") == NODE,
        f"a100-job should run on {NODE} once its GPUs are back; it is {dig(pod, 'status', 'phase')} on {dig(pod, 'spec', 'nodeName') or 'no node'}.",
    )


def user_pods(live):
    """The Pods a drain of the node would evict: all but the DaemonSets' (and mirror Pods, which kwok has none of)."""
    pods = live.list("Pod", fields=f"spec.nodeName={NODE}")
    return {f"{dig(p, 'metadata', 'namespace')}/{k8s.name_of(p)}" for p in pods if not k8s.daemonset_owner(p)}, {
        f"{dig(p, 'metadata', 'namespace')}/{k8s.name_of(p)}" for p in pods if k8s.daemonset_owner(p)
    }


def test_impact_report(learner, live):
    evicted, agents = user_pods(live)
    ready = live.get("DaemonSet", f"{NAMESPACE}/gpu-feature-discovery")
    asked: dict[str, answers.Answer] = {
        "NODE": answers.word(NODE),
        "UNSCHEDULABLE": answers.yes_no(True, why="the node is cordoned"),
        "DS_READY": answers.number(
            k8s.Rollout.of(ready).ready if ready else 3, why="as gpu-feature-discovery's status shows"
        ),
        "USER_PODS": answers.items(
            evicted,
            why="the Pods on the node that no DaemonSet owns",
            hint=lambda written: (
                "A drain skips DaemonSet Pods: list only the Pods no DaemonSet owns."
                if written & agents or any(item.startswith(f"{NAMESPACE}/") for item in written)
                else f"The Pods on {NODE} are in other namespaces than the current one: list them in every namespace "
                f"(kubectl get pods -A --field-selector spec.nodeName={NODE})."
                if not written and evicted
                else None
            ),
        ),
    }
    answers.expect_answers(
        learner.file(REPORT), asked, detail={"evicted": sorted(evicted), "daemonset_pods": sorted(agents)}
    )
