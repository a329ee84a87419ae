"""Step 6: what the device plugin does, through the node status."""

import pytest

from pytest_gpulab.feedback import expect, fail, shown
from pytest_gpulab.parsing import dig, read_amount_table

pytestmark = pytest.mark.step(6, "GPU advertised through the node status", points=10)

POD = "/api/v1/namespaces/gpu-lab/pods/cuda-probe"
POD_WAIT_SECONDS = 20


def advertised(node, field):
    return dig(node, "status", field, "nvidia.com/gpu")


def test_node_advertises_gpus(lab_root, live):
    node = live.get("/api/v1/nodes/lab-node-0")
    expect(node, "The node lab-node-0 is not in the cluster.")
    capacity, allocatable = advertised(node, "capacity"), advertised(node, "allocatable")
    if capacity is None and allocatable is None:
        fail(
            "lab-node-0 does not advertise nvidia.com/gpu.",
            hint="Node status is a separate subresource: a plain patch is ignored. Use kubectl patch node lab-node-0 --subresource=status.",
        )
    expect(
        capacity == "4" and allocatable == "4",
        f'lab-node-0 should advertise nvidia.com/gpu "4" in both capacity and allocatable, found capacity {shown(capacity)}, allocatable {shown(allocatable)}.',
        hint="The scheduler looks at allocatable; fill in both." if capacity != allocatable else None,
        detail=node.get("status"),
    )

    pod = live.wait_for(POD, lambda p: dig(p, "status", "phase") == "Running", POD_WAIT_SECONDS)
    expect(pod, "The Pod gpu-lab/cuda-probe is not in the cluster (step 5 creates it).")
    node_name = dig(pod, "spec", "nodeName")
    phase = dig(pod, "status", "phase")
    expect(
        node_name == "lab-node-0" and phase == "Running",
        f"cuda-probe should be bound to lab-node-0 and Running, found node {shown(node_name)}, phase {shown(phase)}.",
        detail=pod.get("status"),
    )

    display = "out/node-gpu.txt"
    table = read_amount_table(lab_root / display, display)
    expected = {"lab-node-0": {4}, "lab-node-1": {0, 20}, "lab-node-2": {0}}
    missing = sorted(set(expected) - set(table))
    expect(not missing, f"{display} should list the three nodes with their GPU amounts; missing {', '.join(missing)}.", detail=table)
    for name, allowed in expected.items():
        allowed_text = " or ".join(str(a) if a else "none" for a in sorted(allowed, reverse=True))
        wrong = [amount for amount in table[name] if amount not in allowed]
        expect(not wrong, f"{display}: {name} should read {allowed_text}, found {shown(wrong[0] if wrong else None)}.", detail=table)
