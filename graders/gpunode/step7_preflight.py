"""Step 7: preflight.sh refuses changes while the cluster is not healthy, and says why.

Run live at the end state, its BLOCKED lines must be the problems the grader finds itself:
pools Updating, nodes not Ready or cordoned, and blocking taints the cluster does not manage.
The copy saved at step 7, taint still on and node not yet cordoned, is compared with that moment.
A gate only reads (a change it tries is refused and fails it), and fails closed: an API server that
answers 503, or none at all, is no all-clear.
"""

import pytest

from pytest_gpulab.grading import (
    FAILING_API,
    SYSTEM_TAINT_PREFIX,
    Run,
    condition,
    expect_fails_closed,
    expect_saved_verdict,
    expect_verdict,
    is_cordoned,
    is_custom,
    is_ready,
    lab_nodes,
    name_of,
    taints,
)

pytestmark = pytest.mark.step(7, "preflight.sh gates changes on the cluster's health", points=15)

SCRIPT = "bin/preflight.sh"
SAVED = "out/preflight.txt"
AT_STEP_7 = {"BLOCKED=mcp/worker", "BLOCKED=taint/lab-node-2/ai4dd-a100-reserved"}
SYSTEM_TAINT_HINT = (
    f"Taints whose key begins with {SYSTEM_TAINT_PREFIX} are the cluster's own (a cordon adds "
    "node.kubernetes.io/unschedulable): report the node, not a taint."
)


def blockers(live, lab):
    """What the gate must refuse on, as the lab's pools and nodes are now."""
    found = {
        f"mcp/{name_of(p)}" for p in live.list("MachineConfigPool") if condition(p, "Updating").get("status") == "True"
    }
    for node in lab_nodes(live, lab.environment.node_names):
        if not is_ready(node) or is_cordoned(node):
            found.add(f"node/{name_of(node)}")
        found |= {f"taint/{name_of(node)}/{taint.get('key')}" for taint in taints(node) if is_custom(taint)}
    return {f"BLOCKED={reason}" for reason in found}


def system_taint_reported(printed):
    return SYSTEM_TAINT_HINT if any(f"/{SYSTEM_TAINT_PREFIX}" in line for line in printed) else None


@pytest.fixture(scope="module")
def gate(script_runner, learner):
    """The gate's runs, side by side: on the cluster, and on an API server that fails each way."""
    runs = script_runner.runs_of(learner.file(SCRIPT))
    return runs.ahead(Run(cluster=True), *(Run(cluster=True, api=fault) for fault in FAILING_API))


def test_gate_at_the_end_state(gate, live, lab):
    expected = blockers(live, lab)
    run = gate.run(cluster=True)
    expect_verdict(
        run.result, SCRIPT, "Run on the cluster as it is now", expected, prefix="BLOCKED", hint=system_taint_reported
    )


@pytest.mark.parametrize("fault", sorted(FAILING_API))
def test_fails_closed_when_the_api_fails(gate, fault):
    expect_fails_closed(gate.run(cluster=True, api=fault).result, SCRIPT, fault, prefix="BLOCKED")


def saved_too_late(saved):
    if "BLOCKED=node/lab-node-2" in saved.findings:
        return "Save the gate's output at step 7, before the taint is removed and the node cordoned."
    return None


def test_saved_at_step_7(learner):
    expect_saved_verdict(
        learner.file(SAVED), AT_STEP_7, prefix="BLOCKED", why="what the gate finds at step 7 with the taint on",
        hint=lambda saved: system_taint_reported(saved.findings) or saved_too_late(saved),
    )  # fmt: skip
