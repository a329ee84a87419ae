"""Step 2: a mistyped handler passes the API server and the scheduler; only the node finds out."""

import re

import pytest

from pytest_gpulab.feedback import Words, expect, expect_value, fail, should_be, shown
from pytest_gpulab.kube import check_runtimeclass, condition
from pytest_gpulab.manifests import written_and_applied
from pytest_gpulab.parsing import dig, parse_yes_no

pytestmark = pytest.mark.step(2, "A mistyped handler is not validated", points=10)

TYPO = "k8s/runtimeclass-typo.yaml"
ANSWERS = "out/unvalidated.txt"
LOADED = ("runc", "nvidia", "nvidia-cdi")  # what the lab's nodes load
STAGES = {
    "containercreation",
    "containercreating",
    "sandboxcreation",
    "create",
    "creation",
    "runtime",
    "createcontainer",
}
TOO_EARLY = {"scheduling", "admission", "apply", "validation", "api", "apiserver"}
WHO = {"node", "kubelet", "containerd", "thenode"}


def check_typo(runtimeclass):
    check_runtimeclass()(runtimeclass)
    handler = runtimeclass["handler"]
    expect(
        handler not in LOADED,
        f"the handler {shown(handler)} is one the nodes load, so it is not a typo.",
        hint=f"Give nvidia-typo a handler no node has (none of {', '.join(LOADED)}), e.g. nvidai.",
    )


def check_probe(pod):
    expect_value(dig(pod, "metadata", "namespace"), "gpu-rt", "the Pod's namespace")
    expect_value(dig(pod, "spec", "runtimeClassName"), "nvidia-typo", "spec.runtimeClassName")


def test_typo_runtimeclass(learner, live):
    written_and_applied(learner.file(TYPO), live, "RuntimeClass", "nvidia-typo", check_typo)


def test_probe_typo_is_scheduled(learner, live):
    expect(
        dig(learner.file(TYPO).object("Pod", "probe-typo"), "spec", "nodeName") is None,
        f"{TYPO} sets spec.nodeName; let the scheduler place the Pod.",
    )
    written_and_applied(learner.file(TYPO), live, "Pod", "gpu-rt/probe-typo", check_probe)
    pod = live.wait_for("Pod", "gpu-rt/probe-typo", lambda p: condition(p, "PodScheduled").get("status") == "True", 20)
    expect(
        condition(pod, "PodScheduled").get("status") == "True" and dig(pod, "spec", "nodeName"),
        f"probe-typo should be bound to a node despite its handler; found node {shown(dig(pod, 'spec', 'nodeName'))}.",
        detail=dig(pod, "status"),
    )


def word(value):
    return re.sub(r"[^a-z]", "", value.lower())


def test_answers(learner):
    values = learner.file(ANSWERS).key_values("API_VALIDATES_HANDLER", "FAILS_AT", "VISIBLE_TO")
    wrong = []
    if parse_yes_no(values["API_VALIDATES_HANDLER"]) is not False:
        wrong.append(
            should_be(
                "API_VALIDATES_HANDLER",
                Words("no"),
                values["API_VALIDATES_HANDLER"],
                why="the API server took the typo",
            )
        )
    if word(values["FAILS_AT"]) not in STAGES:
        wrong.append(
            should_be(
                "FAILS_AT", Words("the stage of container creation (e.g. container-creation)"), values["FAILS_AT"]
            )
        )
    if word(values["VISIBLE_TO"]) not in WHO:
        wrong.append(
            should_be(
                "VISIBLE_TO", Words("node"), values["VISIBLE_TO"], why="only the node's runtime knows its handlers"
            )
        )
    hint = None
    if word(values["FAILS_AT"]) in TOO_EARLY:
        hint = "The Pod was accepted and scheduled: nothing fails until the node's runtime is asked to create the container."
    if wrong:
        fail(f"{ANSWERS}: " + " ".join(wrong), hint=hint, detail=values)
