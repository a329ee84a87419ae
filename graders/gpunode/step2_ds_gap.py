"""Step 2: the reservation taint, the agents' restart, and the gap the DaemonSet status hides."""

import pytest

from pytest_gpulab.grading import answers, blocked_unless, dig, expect, k8s, listed

pytestmark = pytest.mark.step(2, "The reservation taint and the gap the status hides", points=10)

REPORT = "out/ds-gap.txt"
OPERATOR = "nvidia-gpu-operator"
AGENTS = ("gpu-feature-discovery", "nvidia-device-plugin-daemonset")
TAINTED = "lab-node-2"
AS_THE_STATUS_SAID = "as the DaemonSet's status read once the restart settled"
EXPECTED_HINT = (
    "The controller stops counting a node whose taint its Pods do not tolerate: DESIRED drops with it. "
    "Write what the status says, not what you expect."
)


def test_status_numbers(learner):
    answers.expect_answers(
        learner.file(REPORT),
        {
            "DESIRED": answers.number(2, why=AS_THE_STATUS_SAID, hints={3: EXPECTED_HINT}),
            "READY": answers.number(2, why=AS_THE_STATUS_SAID),
            "STATUS_LOOKS_HEALTHY": answers.yes_no(
                True, why="READY equals DESIRED", hint="The status is self-consistent: READY equals DESIRED."
            ),
        },
    )


def test_labels_against_pods(learner, lab):
    answers.expect_answers(
        learner.file(REPORT),
        {
            "LABELED_NODES": answers.count_of(lab.environment.node_names, why="every node carries the label"),
            "MISSING_NODE": answers.word("lab-node-2", why="the tainted node lost its Pod"),
        },
    )


def never_restarted(pods, daemonset, generation):
    """Whether the DaemonSet's Pod on the tainted node is as old as one on another node: it was never deleted.
    (Deleted, it came back only once the taint went, after the others; a rollout restart also renews the others
    first.) No Pod there: the gap is still open, which step 8 judges. A DaemonSet changed since it was made
    (generation past 1) may have renewed every Pod since, so its Pods tell nothing of step 2: not judged."""
    if generation != 1:
        return False
    own = [pod for pod in pods if k8s.daemonset_owner(pod) == daemonset]
    there = [str(dig(p, "metadata", "creationTimestamp")) for p in own if dig(p, "spec", "nodeName") == TAINTED]
    elsewhere = [str(dig(p, "metadata", "creationTimestamp")) for p in own if dig(p, "spec", "nodeName") != TAINTED]
    return bool(there and elsewhere) and min(there) <= max(elsewhere)


def test_both_agents_were_restarted_on_the_tainted_node(live):
    pods = live.list("Pod", OPERATOR)
    missing = [name for name in AGENTS if not any(k8s.daemonset_owner(pod) == name for pod in pods)]
    blocked_unless(not missing, f"a Pod of {listed(missing)} in {OPERATOR}, which step 1 deploys,", step=1)
    generations = {k8s.name_of(ds): dig(ds, "metadata", "generation") for ds in live.list("DaemonSet", OPERATOR)}
    kept = [name for name in AGENTS if never_restarted(pods, name, generations.get(name))]
    expect(
        not kept,
        f"The {listed(kept)} Pod on {TAINTED} is as old as its Pods on the other nodes: it was never deleted, so the "
        f"gap was opened for one agent only. Delete the Pods of both DaemonSets on {TAINTED} while it is tainted.",
        detail={k8s.name_of(p): dig(p, "metadata", "creationTimestamp") for p in pods},
    )
