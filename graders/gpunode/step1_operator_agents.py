"""Step 1: GPUs on every node, the operator's labels, and its two agents as label-gated DaemonSets."""

import pytest

from pytest_gpulab.grading import Words, dig, expect, expect_value, fail, k8s, listed, should_be

pytestmark = pytest.mark.step(1, "GPUs, labels and the operator's two DaemonSets", points=15)

NAMESPACE = "nvidia-gpu-operator"
LABELS = (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.device-plugin",
)
RESERVED = "lab-node-2"  # step 3 takes its allocatable GPUs away, step 8 gives them back
BLANKET_HINT = (
    "A toleration with operator Exists and no key tolerates every taint, the reservation's too; "
    "the agents must not tolerate custom taints, so leave it out."
)


def custom_tolerations(daemonset):
    """The tolerations that let the DaemonSet's Pods onto a node with a custom taint."""
    return [t for t in k8s.tolerations(daemonset) if not str(t.get("key") or "").startswith(k8s.SYSTEM_TAINT_PREFIX)]


def check_daemonset(label):
    def check(daemonset):
        expect_value(dig(daemonset, "metadata", "namespace"), NAMESPACE, "the DaemonSet's namespace")
        selector = dig(daemonset, "spec", "template", "spec", "nodeSelector") or {}
        found = selector.get(label)
        expect(
            found == "true",
            should_be(f"The Pod template's nodeSelector {label}", "true", found)
            + (" YAML reads an unquoted true as a boolean; quote it." if found is True else ""),
        )
        for toleration in custom_tolerations(daemonset):
            if not toleration.get("key"):
                fail("The Pod template tolerates every taint (operator: Exists with no key).", hint=BLANKET_HINT)
            fail(
                f"The Pod template tolerates the custom taint {toleration.get('key')}; the agents must not.",
                hint="Leave out every toleration whose key is not one of the cluster's own node.kubernetes.io/ taints.",
            )

    return check


def test_gpu_feature_discovery(learner, live):
    k8s.written_and_applied(
        learner.file("k8s/gfd-ds.yaml"),
        live,
        "DaemonSet",
        f"{NAMESPACE}/gpu-feature-discovery",
        check_daemonset(LABELS[1]),
    )


def test_device_plugin(learner, live):
    k8s.written_and_applied(
        learner.file("k8s/device-plugin-ds.yaml"),
        live,
        "DaemonSet",
        f"{NAMESPACE}/nvidia-device-plugin-daemonset",
        check_daemonset(LABELS[2]),
    )


def test_nodes_labeled_for_the_operator(live, lab):
    unlabeled = {
        node: [label for label in LABELS if dig(live.get("Node", node), "metadata", "labels", label) != "true"]
        for node in lab.environment.node_names
    }
    wrong = [f"{node} lacks {listed(labels)}" for node, labels in unlabeled.items() if labels]
    expect(not wrong, f"Every node should carry the three operator labels set to true: {'; '.join(wrong)}.")


def test_nodes_advertise_four_gpus(live, lab):
    found = {node: k8s.advertised(live.get("Node", node), "nvidia.com/gpu") for node in lab.environment.node_names}
    wrong = [
        f"{node} capacity {capacity or 'none'}" + (f", allocatable {allocatable or 'none'}" if node != RESERVED else "")
        for node, (capacity, allocatable) in found.items()
        if capacity != "4" or (node != RESERVED and allocatable != "4")
    ]
    expect(
        not wrong,
        should_be("nvidia.com/gpu on every node", Words('"4" in capacity and allocatable'), Words("; ".join(wrong))),
        hint="Node status is a subresource: kubectl patch node NODE --subresource=status."
        if any(not capacity for capacity, _ in found.values())
        else None,
        detail=found,
    )
