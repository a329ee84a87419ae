"""Step 4: ds-coverage.sh finds the nodes a DaemonSet should cover but does not, by labels and Pods.

The grader computes the truth itself (nodes the nodeSelector matches against the DaemonSet's own
Pods) and runs the script live on two namespaces, one of them without DaemonSets. The MISSING
path is run live too, on a read-only view of the cluster that hides a random Pod of each
DaemonSet, as the taint did, and whose DaemonSet status stays self-consistent, as it did then; on
that view a namespace without DaemonSets must still be OK, so a script that ignores its argument
shows. The rest of its contract (``CHECKER``: fails closed, only reads, uses its argument, a second
run) the plugin checks. The runs start side by side.
"""

import pytest

from pytest_gpulab.grading import Case, Cases, Checker, StepFailed, blocked_unless, dig, expect, k8s, listed, scripts

pytestmark = pytest.mark.step(4, "ds-coverage.sh checks coverage by labels, not by status", points=15, needs=1)

SCRIPT = "bin/ds-coverage.sh"
CHECKER = Checker(SCRIPT, args=("NAMESPACE",), finding="MISSING", reads_cluster=True)
SAVED = "out/coverage.txt"
OPERATOR = "nvidia-gpu-operator"
TAINTED = "lab-node-2"
AT_THE_GAP = {"MISSING=gpu-feature-discovery/lab-node-2", "MISSING=nvidia-device-plugin-daemonset/lab-node-2"}
STATUS_HINT = (
    "The DaemonSet's status stops counting a node it does not schedule on, so it agrees with itself: "
    "compare the nodes its nodeSelector matches with the nodes its Pods run on."
)

SAVED_LATE_HINT = (
    f"{SCRIPT} reports the gap when it is open (the grader showed it one), so this OK was saved after the gap "
    "closed: run it at step 4, while lab-node-2 is tainted, and save that output."
)


@pytest.fixture(scope="module")
def quiet_namespace(lab_cluster):
    """A namespace with no DaemonSet: the learner's research namespace if it has none, else default."""
    live = lab_cluster.live_or_fail()
    return next(ns for ns in ("research", "default") if live.get("Namespace", ns) and not live.list("DaemonSet", ns))


@pytest.fixture(scope="module")
def agents(lab_cluster):
    """The DaemonSets' Pods in the operator's namespace."""
    return [pod for pod in lab_cluster.live_or_fail().list("Pod", OPERATOR) if k8s.daemonset_owner(pod)]


@pytest.fixture(scope="module")
def hidden(agents, step_random):
    """A random Pod of each DaemonSet, to hide as the taint did."""
    by_owner: dict[str, list] = {}
    for pod in sorted(agents, key=k8s.name_of):
        by_owner.setdefault(str(k8s.daemonset_owner(pod)), []).append(pod)
    return {(OPERATOR, k8s.name_of(step_random.choice(group))) for group in by_owner.values()}


@pytest.fixture(scope="module")
def view(lab_cluster, hidden, tmp_path_factory):
    with scripts.DoctoredView(lab_cluster.live_or_fail().source, hidden, tmp_path_factory.mktemp("view")) as doctored:
        yield doctored


@pytest.fixture(scope="module")
def near_view(near_miss_cluster, tmp_path_factory):
    """The copy with the lab's near misses (a node whose agent labels are "false", a look-alike Pod on lab-node-2, a
    DaemonSet selecting by two labels and one with no nodeSelector), the DaemonSets' own Pods on lab-node-2 hidden,
    as the taint left them."""
    gone = {
        (OPERATOR, k8s.name_of(pod)) for pod in near_miss_cluster.list("Pod", OPERATOR)
        if k8s.daemonset_owner(pod) and dig(pod, "spec", "nodeName") == TAINTED
    }  # fmt: skip
    with scripts.DoctoredView(near_miss_cluster.source, gone, tmp_path_factory.mktemp("near")) as doctored:
        yield doctored, gone


@pytest.fixture(scope="module")
def coverage(script_runner, learner, quiet_namespace, view):
    """The script's runs, side by side: the operator's namespace and one without DaemonSets, on the
    cluster and on the view that hides a Pod of each DaemonSet, and on an API server that fails."""
    return script_runner.runs_of(learner.file(SCRIPT)).ahead(
        scripts.Run(OPERATOR, cluster=True), scripts.Run(quiet_namespace, cluster=True),
        scripts.Run(OPERATOR, cluster=True, view=view), scripts.Run(quiet_namespace, cluster=True, view=view),
        *(scripts.Run(OPERATOR, cluster=True, api=fault) for fault in scripts.FAILING_API),
    )  # fmt: skip


@pytest.fixture(scope="module")
def checker_cases(coverage, lab, lab_cluster, hidden, view, quiet_namespace, near_view, near_miss_cluster):
    """On the view that hides a Pod of each DaemonSet: the operator's namespace, and one without DaemonSets."""
    live = lab_cluster.live_or_fail()
    near_gaps = frozenset(missing(k8s.coverage_gaps(near_miss_cluster, OPERATOR, near_view[1])))
    return Cases(
        coverage,
        Case(f"With a Pod of each DaemonSet gone, run on {OPERATOR}", (OPERATOR,), {"view": view},
             frozenset(missing(k8s.coverage_gaps(live, OPERATOR, hidden)))),
        Case(f"With a Pod of each DaemonSet in {OPERATOR} gone, run on {quiet_namespace}", (quiet_namespace,),
             {"view": view}),
        changed=Case(f"Run on {OPERATOR} on the cluster as it is now", (OPERATOR,),
                     expected=frozenset(missing(k8s.coverage_gaps(live, OPERATOR)))),
        near_misses=Case(
            f"On the near-miss copy (gpulab labs gpunode lists it), its agents on {TAINTED} gone, run on {OPERATOR}",
            (OPERATOR,), {"view": near_view[0]}, near_gaps,
            hint=scripts.near_miss_hint(lab.near_misses, near_gaps)),
    )  # fmt: skip


def trusts_the_status(expected):
    """The status hint, where the output fits a checker that trusts the DaemonSet's status: it reports fewer of the
    gaps than there are (none, often) and nothing else."""
    return lambda printed: STATUS_HINT if printed < expected else None


def missing(gaps):
    return {f"MISSING={gap}" for gap in gaps}


def test_never_reads_desired_number_scheduled(learner):
    expect(
        "desirednumberscheduled" not in learner.file(SCRIPT).code().lower(),
        f"{SCRIPT} reads desiredNumberScheduled, the number that hid the gap.",
        hint=STATUS_HINT,
    )


def test_operator_namespace_live(coverage, live):
    expected = missing(k8s.coverage_gaps(live, OPERATOR))
    run = coverage.run(OPERATOR, cluster=True)
    scripts.expect_verdict(
        run.result, SCRIPT, f"Run on {OPERATOR}", expected, prefix="MISSING", hint=trusts_the_status(expected)
    )


def test_namespace_without_daemonsets(coverage, live, quiet_namespace):
    run = coverage.run(quiet_namespace, cluster=True)
    scripts.expect_verdict(
        run.result, SCRIPT, f"Run on {quiet_namespace}, which has no DaemonSet", set(), prefix="MISSING"
    )


def test_finds_pods_that_are_gone(coverage, agents, hidden, view, live, step_random):
    blocked_unless(agents, f"a DaemonSet Pod in {OPERATOR}, which step 1 deploys,")
    expected = missing(k8s.coverage_gaps(live, OPERATOR, hidden))
    run = coverage.run(OPERATOR, cluster=True, view=view)
    nodes = listed(
        sorted({str(dig(pod, "spec", "nodeName")) for pod in agents if (OPERATOR, k8s.name_of(pod)) in hidden})
    )
    scripts.expect_verdict(
        run.result,
        SCRIPT,
        f"With a Pod of each DaemonSet gone from {nodes}",
        expected,
        prefix="MISSING",
        hint=trusts_the_status(expected),
        detail={"hidden": sorted(hidden), **step_random.detail},
    )


def test_namespace_without_daemonsets_while_pods_are_gone(coverage, quiet_namespace, view):
    elsewhere = (
        f"{quiet_namespace} has no DaemonSet, so these findings are of another namespace's: read the DaemonSets and "
        'their Pods in the namespace of the argument (kubectl -n "$1"), in every call.'
    )
    scripts.expect_verdict(
        coverage.run(quiet_namespace, cluster=True, view=view).result, SCRIPT,
        f"With a Pod of each DaemonSet in {OPERATOR} gone, run on {quiet_namespace}", set(), prefix="MISSING",
        hint=lambda printed: elsewhere if printed else None, hint_first=True,
    )  # fmt: skip


def test_saved_while_the_gap_was_open(learner, coverage, view, live, hidden):
    finds_it = finds_the_gap(coverage, view, missing(k8s.coverage_gaps(live, OPERATOR, hidden)))
    scripts.expect_saved_verdict(
        learner.file(SAVED), AT_THE_GAP, prefix="MISSING", why="what the script finds while the gap is open",
        hint=lambda saved: (SAVED_LATE_HINT if finds_it else STATUS_HINT) if saved.ok and not saved.findings else None,
    )  # fmt: skip


def finds_the_gap(coverage, view, expected):
    """Whether the script, shown a gap, reports exactly it: then a saved OK was saved when there was none."""
    try:
        result = coverage.run(OPERATOR, cluster=True, view=view).result
    except StepFailed:  # no script to run: the other checks say so
        return False
    return bool(expected) and set(scripts.findings_in(result.stdout, "MISSING")) == expected
