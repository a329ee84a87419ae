"""Step 2: a mistyped handler passes the API server and the scheduler; only the node finds out."""

import pytest

from pytest_gpulab.grading import answers, dig, expect, expect_value, k8s, shown

pytestmark = pytest.mark.step(2, "A mistyped handler is not validated", points=10)

TYPO = "k8s/runtimeclass-typo.yaml"
REPORT = "out/unvalidated.txt"
LOADED = ("runc", "nvidia", "nvidia-cdi")  # what the lab's nodes load
TOO_EARLY = answers.phrase("scheduling", "admission", "apply", "validation", "api", "apiserver")
TOO_EARLY_HINT = (
    "The Pod was accepted and scheduled: nothing fails until the node's runtime is asked to create the container."
)
ANSWERS = {
    "API_VALIDATES_HANDLER": answers.yes_no(False, why="the API server took the typo"),
    "FAILS_AT": answers.phrase(
        "container-creation", "container-creating", "sandbox-creation", "create", "creation", "runtime",
        "create-container", shown_as="the stage of container creation (e.g. container-creation)",
        hint=lambda written: TOO_EARLY_HINT if TOO_EARLY.accepts(written) else None,
    ),
    "VISIBLE_TO": answers.phrase("node", "kubelet", "containerd", "the node", why="only the node's runtime knows its handlers"),
}  # fmt: skip


def check_typo(runtimeclass):
    k8s.check_runtimeclass()(runtimeclass)
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
    k8s.written_and_applied(learner.file(TYPO), live, "RuntimeClass", "nvidia-typo", check_typo)


def test_probe_typo_is_scheduled(learner, live):
    expect(
        dig(learner.file(TYPO).object("Pod", "probe-typo"), "spec", "nodeName") is None,
        f"{TYPO} sets spec.nodeName; let the scheduler place the Pod.",
    )
    k8s.written_and_applied(learner.file(TYPO), live, "Pod", "gpu-rt/probe-typo", check_probe)
    pod = live.wait_for(
        "Pod", "gpu-rt/probe-typo", lambda p: k8s.condition(p, "PodScheduled").get("status") == "True", 20
    )
    expect(
        k8s.condition(pod, "PodScheduled").get("status") == "True" and dig(pod, "spec", "nodeName"),
        f"probe-typo should be bound to a node despite its handler; it is {k8s.where_it_is(pod)}.",
        detail=dig(pod, "status"),
    )


def test_answers(learner):
    answers.expect_answers(learner.file(REPORT), ANSWERS)
