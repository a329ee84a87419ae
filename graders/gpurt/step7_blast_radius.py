"""Step 7: a drop-in that makes nvidia the default runtime, and how far a break would reach."""

import pytest

from pytest_gpulab.grading import answers, containerd, dig, expect, should_be

pytestmark = pytest.mark.step(7, "The default runtime and its blast radius", points=10)

DROPIN = "etc/conf.d/50-default.toml"
REPORT = "out/blast.txt"
ANSWERS = {
    "DEFAULT_RUNTIME": answers.word("nvidia"),
    "AFFECTED": answers.phrase(
        "all", "all pods", "every", "everything", "every pod", "all of them",
        hint=lambda _: "Every Pod without a runtimeClassName runs on the default runtime, GPU or not.",
    ),
    "NEEDS_RUNTIMECLASS": answers.yes_no(False, why="the default applies without one"),
    "BLAST_RADIUS": answers.phrase(
        "node", "node-wide", "whole node", "entire node", "the node", "all node", "the whole node",
        hint=lambda _: "When the default runtime breaks, no Pod on that node can start, not only one.",
    ),
}  # fmt: skip


def test_default_runtime_dropin(learner):
    """The lab names no main file for this drop-in: one that states no version may use either plugin name."""
    dropin = learner.file(DROPIN).toml()
    containerd.expect_plugins_match_version(dropin, DROPIN)
    defaults = [
        dig(dropin, "plugins", plugin, "containerd", "default_runtime_name")
        for plugin in (containerd.CRI_V2, containerd.CRI_V3_RUNTIME)
    ]
    expect(
        "nvidia" in defaults,
        should_be(
            f'{DROPIN}: default_runtime_name under [plugins."{containerd.CRI_V2}".containerd]',
            "nvidia",
            next((d for d in defaults if d is not None), None),
        ),
        hint=containerd.misplaced_table(dropin, "plugins", containerd.CRI_V2, "containerd", "default_runtime_name"),
    )


def test_blast_answers(learner):
    answers.expect_answers(learner.file(REPORT), ANSWERS)
