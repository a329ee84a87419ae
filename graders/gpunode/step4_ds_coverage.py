"""Step 4: ds-coverage.sh finds the nodes a DaemonSet should cover but does not, by labels and Pods.

The grader computes the truth itself (nodes the nodeSelector matches against the DaemonSet's own
Pods) and runs the script live on two namespaces, one of them without DaemonSets. The MISSING
path is run live too, on a read-only view of the cluster that hides a random Pod of each
DaemonSet, as the taint did, and whose DaemonSet status stays self-consistent, as it did then.
"""

import pytest

from pytest_gpulab.clusterview import DoctoredView
from pytest_gpulab.feedback import blocked_unless, expect, listed
from pytest_gpulab.nodes import coverage_gaps, daemonset_owner, name_of
from pytest_gpulab.parsing import dig
from pytest_gpulab.verdicts import expect_verdict, findings_in, says_ok

pytestmark = pytest.mark.step(4, "ds-coverage.sh checks coverage by labels, not by status", points=15, needs=1)

SCRIPT = "bin/ds-coverage.sh"
SAVED = "out/coverage.txt"
OPERATOR = "nvidia-gpu-operator"
AT_THE_GAP = {"MISSING=gpu-feature-discovery/lab-node-2", "MISSING=nvidia-device-plugin-daemonset/lab-node-2"}
STATUS_HINT = (
    "The DaemonSet's status stops counting a node it does not schedule on, so it agrees with itself: "
    "compare the nodes its nodeSelector matches with the nodes its Pods run on."
)


@pytest.fixture(scope="module")
def coverage(script_runner, learner):
    return script_runner.runs_of(learner.file(SCRIPT))


@pytest.fixture(scope="module")
def quiet_namespace(lab_cluster):
    """A namespace with no DaemonSet: the learner's research namespace if it has none, else default."""
    live = lab_cluster.live_or_fail()
    names = {name_of(ns) for ns in live.list("Namespace")}
    return next(ns for ns in ("research", "default") if ns in names and not live.list("DaemonSet", ns))


def missing(gaps):
    return {f"MISSING={gap}" for gap in gaps}


def test_never_reads_desired_number_scheduled(learner):
    expect(
        "desirednumberscheduled" not in learner.file(SCRIPT).code().lower(),
        f"{SCRIPT} reads desiredNumberScheduled, the number that hid the gap.",
        hint=STATUS_HINT,
    )


def test_operator_namespace_live(coverage, live):
    expected = missing(coverage_gaps(live, OPERATOR))
    run = coverage.run(OPERATOR, cluster=True)
    expect_verdict(run.result, SCRIPT, f"Run on {OPERATOR}", expected, prefix="MISSING", hint=lambda _: STATUS_HINT)


def test_namespace_without_daemonsets(coverage, live, quiet_namespace):
    run = coverage.run(quiet_namespace, cluster=True)
    expect_verdict(run.result, SCRIPT, f"Run on {quiet_namespace}, which has no DaemonSet", set(), prefix="MISSING")


def test_finds_pods_that_are_gone(script_runner, learner, live, lab_random, tmp_path):
    pods = [pod for pod in live.list("Pod", OPERATOR) if daemonset_owner(pod)]
    blocked_unless(pods, f"a DaemonSet Pod in {OPERATOR}, which step 1 deploys,")
    by_owner: dict[str, list] = {}
    for pod in sorted(pods, key=name_of):
        by_owner.setdefault(str(daemonset_owner(pod)), []).append(pod)
    hidden = {(OPERATOR, name_of(lab_random.choice(group))) for group in by_owner.values()}
    expected = missing(coverage_gaps(live, OPERATOR, hidden))
    with DoctoredView(live.source, hidden_pods=hidden, work_dir=tmp_path) as view:
        run = script_runner.run(learner.file(SCRIPT), OPERATOR, cluster=True, kubeconfig=str(view.kubeconfig))
        refused = list(view.refused)
    nodes = listed(sorted({str(dig(pod, "spec", "nodeName")) for pod in pods if (OPERATOR, name_of(pod)) in hidden}))
    expect(
        not refused,
        f"{SCRIPT} tried to change the cluster ({listed(f'{m} {p}' for m, p in refused)}); a checker only reads.",
    )
    expect_verdict(
        run.result,
        SCRIPT,
        f"With a Pod of each DaemonSet gone from {nodes}",
        expected,
        prefix="MISSING",
        hint=lambda _: STATUS_HINT,
        detail={"hidden": sorted(hidden), **lab_random.detail},
    )


def test_saved_while_the_gap_was_open(learner):
    text = learner.file(SAVED).text()
    found = set(findings_in(text, "MISSING"))
    expect(
        found == AT_THE_GAP and not says_ok(text),
        f"{SAVED} should hold exactly {listed(sorted(AT_THE_GAP))}, what the script finds while the gap is open; "
        f"found {listed(sorted(found)) or 'no MISSING line'}" + (" and OK." if says_ok(text) else "."),
        hint=STATUS_HINT if says_ok(text) else None,
    )
