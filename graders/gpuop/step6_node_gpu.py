"""Step 6: what the device plugin does, through the node status."""

import pytest

from pytest_gpulab.grading import answers, blocked_unless, dig, expect, k8s, listed, shown

pytestmark = pytest.mark.step(6, "GPU advertised through the node status", points=10, needs=5)

GPU_NODE = "lab-node-0"  # the lab patches this node's status (step 6)
SLICED_NODE = "lab-node-1"  # and this one's in step 7, which may come before the table is written
TABLE = "out/node-gpu.txt"
GPU = "nvidia.com/gpu"
POD_WAIT_SECONDS = 20


def test_node_advertises_gpus(live, lab):
    k8s.expect_advertises(
        live, GPU_NODE, "nvidia.com/gpu", "4", others=[n for n in lab.environment.node_names if n != GPU_NODE]
    )


def test_cuda_probe_runs_on_the_gpu_node(live):
    pod = live.wait_for("Pod", "gpu-lab/cuda-probe", lambda p: dig(p, "status", "phase") == "Running", POD_WAIT_SECONDS)
    blocked_unless(pod, "the Pod gpu-lab/cuda-probe, which step 5 creates,")
    node, phase = dig(pod, "spec", "nodeName"), dig(pod, "status", "phase")
    expect(
        node == GPU_NODE and phase == "Running",
        f"cuda-probe should be Running on {GPU_NODE}; it is {k8s.where_it_is(pod)}.",
        detail=pod.get("status"),
    )


def allowed_amounts(live, lab):
    """Each node's amount as the cluster advertises it (a wrong one is the cluster's check's to name, not the
    table's), and as it was at step 6: the time-sliced node shows step 7's 20 now, and none at step 6."""
    allowed = {}
    for name in lab.environment.node_names:
        amount = answers.quantity_bytes(k8s.advertised(live.get("Node", name), GPU)[1])
        allowed[name] = {int(amount) if amount is not None else 0} | ({0, 20} if name == SLICED_NODE else set())
    return allowed


def advertising(expected):
    return {name for name, allowed in expected.items() if 0 not in allowed}


def test_node_gpu_table(learner, live, lab):
    table = learner.file(TABLE).amount_table()
    expected = allowed_amounts(live, lab)
    missing = [name for name in expected if name not in table]
    expect(
        not missing,
        f"{TABLE} should list the {len(expected)} nodes with their GPU amounts; missing {listed(missing)}.",
        detail=table,
    )
    wrong = [
        f"{name} should read {' or '.join(str(a) if a else 'none' for a in sorted(allowed, reverse=True))}, found "
        f"{shown(bad[0])}"
        for name, allowed in expected.items()
        if (bad := [amount for amount in table[name] if amount not in allowed])
    ]
    unknown = [
        name for name, amounts in table.items() if name not in expected and all(isinstance(a, int) for a in amounts)
    ]
    wrong += [f"{name} is not a node of this cluster" for name in unknown]
    expect(
        not wrong,
        f"{TABLE}: {'; '.join(wrong)} (as the cluster advertises each node's GPUs).",
        hint=answers.unresolved_path_hint(learner.file(TABLE).text(), advertising(expected), GPU),
        detail=table,
    )
