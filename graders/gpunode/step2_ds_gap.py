"""Step 2: the reservation taint, the agents' restart, and the gap the DaemonSet status hides."""

import pytest

from pytest_gpulab.grading import count_of, expect_answers, number, word, yes_no

pytestmark = pytest.mark.step(2, "The reservation taint and the gap the status hides", points=10)

REPORT = "out/ds-gap.txt"
AS_THE_STATUS_SAID = "as the DaemonSet's status read once the restart settled"
EXPECTED_HINT = (
    "The controller stops counting a node whose taint its Pods do not tolerate: DESIRED drops with it. "
    "Write what the status says, not what you expect."
)


def test_status_numbers(learner):
    expect_answers(
        learner.file(REPORT),
        {
            "DESIRED": number(2, why=AS_THE_STATUS_SAID, hints={3: EXPECTED_HINT}),
            "READY": number(2, why=AS_THE_STATUS_SAID),
            "STATUS_LOOKS_HEALTHY": yes_no(
                True, why="READY equals DESIRED", hint="The status is self-consistent: READY equals DESIRED."
            ),
        },
    )


def test_labels_against_pods(learner, lab):
    expect_answers(
        learner.file(REPORT),
        {
            "LABELED_NODES": count_of(lab.environment.node_names, why="every node carries the label"),
            "MISSING_NODE": word("lab-node-2", why="the tainted node lost its Pod"),
        },
    )
