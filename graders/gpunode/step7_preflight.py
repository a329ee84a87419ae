"""Step 7: preflight.sh refuses changes while the cluster is not healthy, and says why.

Run live at the end state, its BLOCKED lines must be the problems the grader finds itself:
pools Updating, nodes not Ready or cordoned, and blocking taints the cluster does not manage.
The copy saved at step 7, taint still on and node not yet cordoned, is compared with that moment.
A gate only reads (a change it tries is refused and fails it); the rest of its contract (``CHECKER``:
fails closed, a second run) the plugin checks.
"""

import pytest

from pytest_gpulab.grading import Case, Cases, Checker, answers, blocked_unless, dig, k8s, listed, scripts

pytestmark = pytest.mark.step(7, "preflight.sh gates changes on the cluster's health", points=15, needs=5)

SCRIPT = "bin/preflight.sh"
NEAR_MISS = "gpulab.example/near-miss"  # the label of the nodes near-misses/objects.yaml adds to the copy
KINDS = ("mcp/", "node/", "taint/")  # the lab asks for at least these; a gate may block on more
CHECKER = Checker(SCRIPT, finding="BLOCKED", reads_cluster=True, kinds=KINDS)
SAVED = "out/preflight.txt"
AT_STEP_7 = {"BLOCKED=mcp/worker", "BLOCKED=taint/lab-node-2/ai4dd-a100-reserved"}
# A blocker the end state lacks, shown by a view: a custom taint on a Ready, schedulable node.
SHOWN_TAINT = {"key": "gpulab.example/firmware-update", "value": "pending", "effect": "NoExecute"}
SYSTEM_TAINT_HINT = (
    f"Taints whose key begins with {k8s.SYSTEM_TAINT_PREFIX} are the cluster's own (a cordon adds "
    "node.kubernetes.io/unschedulable): report the node, not a taint."
)


def blockers(live, nodes, shown=None):
    """What the gate must refuse on, as the cluster's pools and these nodes are now (with ``shown``, a node's extra
    taints), each with why, for the hint."""
    found = {
        f"BLOCKED=mcp/{k8s.name_of(p)}": f"the pool {k8s.name_of(p)} is Updating"
        for p in live.list("MachineConfigPool") if k8s.condition(p, "Updating").get("status") == "True"
    }  # fmt: skip
    for node in nodes:
        name = k8s.name_of(node)
        if not k8s.is_ready(node) or k8s.is_cordoned(node):
            found[f"BLOCKED=node/{name}"] = f"{name} is {'cordoned' if k8s.is_cordoned(node) else 'not Ready'}"
        for taint in [*k8s.taints(node), *(shown or {}).get(name, [])]:
            if k8s.is_custom(taint):
                found[f"BLOCKED=taint/{name}/{taint.get('key')}"] = (
                    f"{name} has the {taint.get('effect')} taint {taint.get('key')}"
                )
    return found


def may_block(live, nodes):
    """What a gate that does more than the lab asks may also refuse on: a pool that is Degraded, and a node whose
    allocatable GPUs are below its capacity. Both are in fact unhealthy, so reporting them is not a mistake."""
    pools = {
        f"BLOCKED=mcp/{k8s.name_of(p)}" for p in live.list("MachineConfigPool")
        if k8s.condition(p, "Degraded").get("status") == "True"
    }  # fmt: skip
    return frozenset(pools | {f"BLOCKED=node/{k8s.name_of(node)}" for node in nodes if short_of_gpus(node)})


def short_of_gpus(node):
    capacity, allocatable = (answers.quantity_bytes(amount or 0) for amount in k8s.advertised(node, "nvidia.com/gpu"))
    return bool(capacity) and (allocatable or 0) < (capacity or 0)


def why_missed(expected):
    """The hint for blockers the gate left out: what each one is, and its line; or, for a taint reported without its
    node, that the finding names the node."""

    def hint(printed):
        left_out = sorted(set(expected) - printed)
        if not left_out:
            return None
        without_node = [line for line in left_out if without_its_node(line) in printed]
        if without_node:
            return f"Name the node in each taint finding, BLOCKED=taint/NODE/KEY: {listed(without_node)}."
        said = listed(f"{expected[line]} ({line})" for line in left_out)
        return f"It did not report that {said}{gate_rule(left_out, expected, printed)}"

    return hint


def gate_rule(left_out, expected, printed):
    """The part of the gate's rule the left-out findings show it broke: the pools, every node, or a taint's effect."""
    rules = []
    if any("=mcp/" in line for line in left_out):
        rules.append("reads every pool")
    if any("=node/" in line or "=taint/" in line for line in left_out):
        rules.append("reads every node")
    taints = [line for line in left_out if "=taint/" in line]
    read = {node_of(line) for line in printed if "=taint/" in line}  # nodes whose taints it did read
    if taints and all("NoExecute" in expected[line] and node_of(line) in read for line in taints):
        rules = ["blocks on NoExecute taints as on NoSchedule ones"]
    return f": a gate {' and '.join(rules)}." if rules else "."


def node_of(line):
    """BLOCKED=taint/NODE/KEY's NODE."""
    return line.partition("=taint/")[2].partition("/")[0]


def without_its_node(line):
    """BLOCKED=taint/NODE/KEY as BLOCKED=taint/KEY."""
    kind, _, rest = line.partition("=taint/")
    return f"{kind}=taint/{rest.partition('/')[2]}" if rest else line


def system_taint_reported(printed):
    return SYSTEM_TAINT_HINT if any(f"/{k8s.SYSTEM_TAINT_PREFIX}" in line for line in printed) else None


@pytest.fixture(scope="module")
def shown(lab):
    """The node the view shows with an extra custom taint: the first lab node."""
    return {lab.environment.node_names[0]: [SHOWN_TAINT]}


@pytest.fixture(scope="module")
def tainted_view(lab_cluster, shown, tmp_path_factory):
    with scripts.DoctoredView(
        lab_cluster.live_or_fail().source, (), tmp_path_factory.mktemp("view"), taints=shown
    ) as view:
        yield view


@pytest.fixture(scope="module")
def gate(script_runner, learner, tainted_view):
    """The gate's runs, side by side: on the cluster, on a view with a custom taint more, and on an API
    server that fails each way."""
    runs = script_runner.runs_of(learner.file(SCRIPT))
    extra = [
        scripts.Run(cluster=True, view=tainted_view),
        *(scripts.Run(cluster=True, api=fault) for fault in scripts.FAILING_API),
    ]
    return runs.ahead(scripts.Run(cluster=True), *extra)


@pytest.fixture(scope="module")
def near_view(near_miss_cluster, tmp_path_factory):
    """The copy with the lab's near misses: lab-node-4 not Ready, lab-node-5 with a PreferNoSchedule taint, pools
    gpu and canary Updating, a pool infra that is not, a pool degraded and lab-node-3 short of GPUs (which a gate
    may also block on)."""
    with scripts.DoctoredView(near_miss_cluster.source, (), tmp_path_factory.mktemp("near")) as view:
        yield view


@pytest.fixture(scope="module")
def checker_cases(gate, lab_cluster, lab, shown, tainted_view, near_view, near_miss_cluster):
    """The cluster as it is, and the view with a custom taint more: their blockers differ."""
    live = lab_cluster.live_or_fail()
    nodes = k8s.lab_nodes(live, lab.environment.node_names)  # the lab's own: a big cluster's others are not read
    copied = k8s.lab_nodes(near_miss_cluster, lab.environment.node_names)  # the copy's, and its near misses
    copied += near_miss_cluster.list("Node", labels={NEAR_MISS: "true"})
    ((node, (taint,)),) = shown.items()
    near_blockers = frozenset(blockers(near_miss_cluster, copied))
    return Cases(
        gate,
        Case("Run on the cluster as it is now", expected=frozenset(blockers(live, nodes)),
             may_add=may_block(live, nodes)),
        Case(f"With {node} also carrying the {taint['effect']} taint {taint['key']}", options={"view": tainted_view},
             expected=frozenset(blockers(live, nodes, shown)), may_add=may_block(live, nodes)),
        near_misses=Case(
            "On the near-miss copy (gpulab labs gpunode lists its nodes and pools)",
            options={"view": near_view}, expected=near_blockers, may_add=may_block(near_miss_cluster, copied),
            hint=scripts.near_miss_hint(lab.near_misses, near_blockers)),
    )  # fmt: skip


@pytest.fixture(autouse=True)
def pools_as_step_5_makes_them(live):
    """The gate reads pools' condition statuses as the API's strings: a pool step 5 left with other types
    blocks this step rather than failing the gate."""
    pools = live.list("MachineConfigPool")
    odd = [
        k8s.name_of(p)
        for p in pools
        if any(not isinstance(c.get("status"), str) for c in dig(p, "status", "conditions", default=[]) or [])
    ]
    blocked_unless(
        not odd, f'condition statuses written as strings ("True") on {listed(odd) or "each pool"}, which step 5 sets,'
    )


@pytest.fixture(scope="module")
def may_add(lab_cluster, lab):
    """What a gate may also block on in the cluster as it is, read once for the step's checks."""
    live = lab_cluster.live_or_fail()
    return may_block(live, k8s.lab_nodes(live, lab.environment.node_names))


def test_gate_at_the_end_state(gate, live, lab, may_add):
    nodes = k8s.lab_nodes(live, lab.environment.node_names)
    expected = blockers(live, nodes)
    run = gate.run(cluster=True)
    scripts.expect_verdict(
        run.result, SCRIPT, "Run on the cluster as it is now", set(expected), prefix="BLOCKED",
        hint=lambda printed: system_taint_reported(printed) or why_missed(expected)(printed), hint_first=True,
        kinds=KINDS, may_add=may_add,
    )  # fmt: skip


def test_gate_on_a_custom_taint_it_did_not_see_in_the_lab(gate, live, lab, shown, tainted_view, may_add):
    nodes = k8s.lab_nodes(live, lab.environment.node_names)
    expected = blockers(live, nodes, shown)
    ((node, (taint,)),) = shown.items()
    scripts.expect_verdict(
        gate.run(cluster=True, view=tainted_view).result, SCRIPT,
        f"With {node} also carrying the {taint['effect']} taint {taint['key']}", set(expected), prefix="BLOCKED",
        hint=lambda printed: system_taint_reported(printed) or why_missed(expected)(printed), hint_first=True,
        kinds=KINDS, may_add=may_add,
    )  # fmt: skip


def saved_too_late(saved):
    if "BLOCKED=node/lab-node-2" in saved.findings:
        return "Save the gate's output at step 7, before the taint is removed and the node cordoned."
    return None


def test_saved_at_step_7(learner):
    scripts.expect_saved_verdict(
        learner.file(SAVED), AT_STEP_7, prefix="BLOCKED", why="what the gate finds at step 7 with the taint on",
        kinds=KINDS,
        hint=lambda saved: system_taint_reported(saved.findings) or saved_too_late(saved),
    )  # fmt: skip
