"""Step 3: two cpu-1 nodes, and a RuntimeClass overhead that splits the same request across them."""

import pytest

from pytest_gpulab.grading import Words, answers, dig, expect, expect_value, fail, k8s, should_be, shown

pytestmark = pytest.mark.step(3, "RuntimeClass overhead splits scheduling", points=15)

NODES = "k8s/node-tight.yaml"
OVERHEAD = "k8s/overhead.yaml"
TIGHT = {"fits": "gpu-tight-a", "over": "gpu-tight-b"}  # each Pod, and the node it is pinned to
WAIT_SECONDS = 20
KWOK = "kwok.x-k8s.io/node"  # the annotation of the nodes kwok manages (value "fake")


def check_tight_node(node):
    cpu = dig(node, "status", "allocatable", "cpu") or dig(node, "status", "capacity", "cpu")
    expect(answers.quantity_bytes(cpu) == 1, should_be("the node's cpu (status capacity and allocatable)", 1, cpu))
    annotation = dig(node, "metadata", "annotations", KWOK)
    expect_value(annotation, "fake", f"the annotation {KWOK}", why="kwok manages only nodes that carry it")


def check_overhead(runtimeclass):
    k8s.check_runtimeclass()(runtimeclass)
    fixed = dig(runtimeclass, "overhead", "podFixed") or {}
    expect(
        answers.quantity_bytes(fixed.get("cpu")) == 0.25 and answers.quantity_bytes(fixed.get("memory")) == 128 * 2**20,
        should_be("overhead.podFixed", Words("cpu 250m, memory 128Mi"), fixed or None),
        hint=answers.decimal_suffix_hint(fixed.get("memory"), "128Mi"),
    )


@pytest.mark.parametrize("name", sorted(TIGHT.values()))
def test_tight_node(learner, live, name):
    k8s.written_and_applied(learner.file(NODES), live, "Node", name, check_tight_node)
    node = live.wait_for("Node", name, lambda n: k8s.condition(n, "Ready").get("status") == "True", WAIT_SECONDS)
    expect(
        k8s.condition(node, "Ready").get("status") == "True",
        f"The node {name} is not Ready.",
        detail=dig(node, "status"),
    )


def test_overhead_runtimeclass(learner, live):
    k8s.written_and_applied(learner.file(OVERHEAD), live, "RuntimeClass", "nvidia-overhead", check_overhead)


def find_pod(live, name):
    """The Pod by name, in gpu-rt first, then in any namespace."""
    found = live.get("Pod", f"gpu-rt/{name}") or next(iter(live.list("Pod", fields=f"metadata.name={name}")), None)
    expect(found, f"The Pod {name} is not in the cluster; apply {OVERHEAD}.")
    return found


@pytest.mark.parametrize("name", sorted(TIGHT))
def test_pod_goes_through_the_scheduler(learner, live, name):
    written = learner.file(OVERHEAD).object("Pod", name)
    if dig(written, "spec", "nodeName"):
        fail(
            f"{OVERHEAD}: {name} sets spec.nodeName, which places the Pod without the scheduler, so the overhead is never weighed.",
            hint=f"Pin it with a nodeSelector (kubernetes.io/hostname: {TIGHT[name]}) or a node affinity instead.",
        )
    expect(
        k8s.pins_to(written),
        f"{OVERHEAD}: {name} should be pinned to {TIGHT[name]} with a nodeSelector or a node affinity.",
    )
    for node_name in TIGHT.values():
        allowed = k8s.selects(written, live.get("Node", node_name))
        expect(
            allowed == (node_name == TIGHT[name]),
            f"{OVERHEAD}: {name}'s selector should allow {TIGHT[name]} and not the other cpu-1 node ({node_name} is {'allowed' if allowed else 'excluded'}).",
        )
    expect_asks_900m(written, f"{OVERHEAD}: {name}")
    expect_value(
        dig(written, "spec", "runtimeClassName"),
        "nvidia-overhead" if name == "over" else None,
        f"{OVERHEAD}: {name}'s runtimeClassName",
    )
    expect_asks_900m(find_pod(live, name), f"In the cluster, {name}")


def expect_asks_900m(pod, where):
    """The cpu the Pod asks for, as the scheduler counts it: its requests, or its limits alone, in any spelling."""
    expect(
        k8s.effective_request(pod, "cpu") == 0.9,
        should_be(f"{where}'s cpu request", Words("900m"), [dig(c, "resources") for c in k8s.containers(pod)] or None),
    )


def not_ready(node):
    """Why fits never runs on its node: the node is not Ready, and kwok may not manage it at all."""
    why = (
        ""
        if dig(node, "metadata", "annotations", KWOK) == "fake"
        else f": kwok manages only nodes annotated {KWOK}: fake"
    )
    return f"fits is on {shown(dig(node, 'metadata', 'name'))}, which is not Ready, so nothing ever runs it{why}."


def test_fits_runs_on_node_a(live):
    namespace = dig(find_pod(live, "fits"), "metadata", "namespace")
    pod = live.wait_for("Pod", f"{namespace}/fits", lambda p: dig(p, "status", "phase") == "Running", WAIT_SECONDS)
    node = live.get("Node", dig(pod, "spec", "nodeName")) if dig(pod, "spec", "nodeName") else None
    expect(
        node is None or k8s.condition(node, "Ready").get("status") == "True", not_ready(node), detail=dig(pod, "status")
    )
    expect(
        dig(pod, "spec", "nodeName") == "gpu-tight-a" and dig(pod, "status", "phase") == "Running",
        f"fits should run on gpu-tight-a; it is {k8s.where_it_is(pod)}.",
        detail=dig(pod, "status"),
    )


def test_over_waits_on_its_overhead(live):
    namespace = dig(find_pod(live, "over"), "metadata", "namespace")
    pod = live.wait_for(
        "Pod", f"{namespace}/over", lambda p: k8s.unschedulable_because(p, "Insufficient cpu"), WAIT_SECONDS
    )
    overhead = dig(pod, "spec", "overhead") or {}
    expect(
        answers.quantity_bytes(overhead.get("cpu")) == 0.25
        and answers.quantity_bytes(overhead.get("memory")) == 128 * 2**20,
        should_be(
            "over's spec.overhead, which the API server fills in from its RuntimeClass",
            Words("cpu 250m, memory 128Mi"),
            overhead or None,
        ),
        hint=answers.decimal_suffix_hint(overhead.get("memory"), "128Mi"),
    )
    expect(
        k8s.unschedulable_because(pod, "Insufficient cpu"),
        f"over should stay Pending for Insufficient cpu (900m + 250m overhead > 1 cpu); it is {k8s.where_it_is(pod)}.",
        hint=k8s.added_by_runtimeclass(pod, live.get("RuntimeClass", "nvidia-overhead")),
        detail=dig(pod, "status"),
    )
