"""Step 7: a drop-in that makes nvidia the default runtime, and how far a break would reach."""

import re

import pytest

from pytest_gpulab.containerd_toml import CRI_V2, CRI_V3_RUNTIME
from pytest_gpulab.feedback import Words, expect, fail, should_be
from pytest_gpulab.parsing import dig, parse_yes_no

pytestmark = pytest.mark.step(7, "The default runtime and its blast radius", points=10)

DROPIN = "etc/conf.d/50-default.toml"
REPORT = "out/blast.txt"
ALL = {"all", "allpods", "every", "everything", "everypod", "allofthem"}
NODE = {"node", "nodewide", "wholenode", "entirenode", "thenode", "allnode", "thewholenode"}
HINTS = {
    "AFFECTED": "Every Pod without a runtimeClassName runs on the default runtime, GPU or not.",
    "BLAST_RADIUS": "When the default runtime breaks, no Pod on that node can start, not only one.",
}


def word(value):
    return re.sub(r"[^a-z]", "", value.lower())


def test_default_runtime_dropin(learner):
    dropin = learner.file(DROPIN).toml()
    defaults = [
        dig(dropin, "plugins", plugin, "containerd", "default_runtime_name") for plugin in (CRI_V2, CRI_V3_RUNTIME)
    ]
    expect(
        "nvidia" in defaults,
        should_be(
            f'{DROPIN}: default_runtime_name under [plugins."{CRI_V2}".containerd]',
            "nvidia",
            next((d for d in defaults if d is not None), None),
        ),
    )


def test_blast_answers(learner):
    values = learner.file(REPORT).key_values("DEFAULT_RUNTIME", "AFFECTED", "NEEDS_RUNTIMECLASS", "BLAST_RADIUS")
    wrong, hints = [], []
    if values["DEFAULT_RUNTIME"].strip().lower() != "nvidia":
        wrong.append(should_be("DEFAULT_RUNTIME", Words("nvidia"), values["DEFAULT_RUNTIME"]))
    for key, accepted, expected in (("AFFECTED", ALL, "all"), ("BLAST_RADIUS", NODE, "node")):
        if word(values[key]) not in accepted:
            wrong.append(should_be(key, Words(expected), values[key]))
            hints.append(HINTS[key])
    if parse_yes_no(values["NEEDS_RUNTIMECLASS"]) is not False:
        wrong.append(
            should_be(
                "NEEDS_RUNTIMECLASS", Words("no"), values["NEEDS_RUNTIMECLASS"], why="the default applies without one"
            )
        )
    if wrong:
        fail(f"{REPORT}: " + " ".join(wrong), hint=" ".join(hints) or None, detail=values)
