"""Step 3: capacity 4, allocatable 0, and the reserved team's job that cannot start."""

import pytest

from pytest_gpulab.grading import Words, answers, dig, expect, expect_value, k8s, listed, should_be

JSONPATH_DOTS = (
    "The value is empty: kubectl's jsonpath reads the dots of nvidia.com/gpu as steps of a path, so "
    "{.status.capacity.nvidia.com/gpu} finds nothing; escape them: {.status.capacity.nvidia\\.com/gpu}."
)
pytestmark = pytest.mark.step(3, "Zero allocatable GPUs block the reserved job", points=15)

POD = "k8s/a100-job.yaml"
REPORT = "out/alloc.txt"
NODE = "lab-node-2"
GPUS = "Insufficient nvidia.com/gpu"
RESERVATION = {"key": "ai4dd-a100-reserved", "value": "true", "effect": "NoSchedule"}


def gpus_asked(pod):
    """The GPUs the Pod asks for, as the scheduler counts them (a whole number shown as one)."""
    amount = k8s.effective_request(pod, "nvidia.com/gpu")
    return int(amount) if amount is not None and amount == int(amount) else amount


def uses_hostname(pod):
    affinity = dig(
        pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
    )
    keys = [e.get("key") for term in affinity or [] for e in term.get("matchExpressions") or [] if isinstance(e, dict)]
    return k8s.HOSTNAME_LABEL in (dig(pod, "spec", "nodeSelector") or {}) or k8s.HOSTNAME_LABEL in keys


def check_job(nodes):
    def check(pod):
        expect_value(dig(pod, "metadata", "namespace"), "research", "the Pod's namespace")
        expect(
            gpus_asked(pod) == 4,
            should_be("The GPUs the Pod asks for (nvidia.com/gpu)", Words("4"), gpus_asked(pod)),
        )
        chosen = [k8s.name_of(node) for node in nodes if k8s.selects(pod, node)]
        expect(
            uses_hostname(pod) and chosen == [NODE],
            f"The Pod should select {NODE}, and only it, by the label {k8s.HOSTNAME_LABEL}; it selects {listed(chosen) or 'no node'}.",
        )
        near = [t for t in k8s.tolerations(pod) if t.get("key") == RESERVATION["key"]]
        expect(
            any(k8s.tolerates(t, RESERVATION) for t in k8s.tolerations(pod)),
            f"The Pod does not tolerate the reservation taint {RESERVATION['key']}=true:NoSchedule"
            + (f": its toleration for that key has effect {near[0].get('effect')}." if near else "."),
            hint="A toleration matches a taint only with the same effect (or none): NoSchedule here."
            if near
            else "It belongs to the team that reserved the node: add a toleration for that key and effect.",
        )

    return check


def test_reserved_job(learner, live, lab):
    node = dig(learner.file(POD).object("Pod", "a100-job"), "spec", "nodeName")
    expect(
        node is None,
        f"{POD} sets spec.nodeName: {node}, which places the Pod without the scheduler, so nothing stops it.",
        hint=f"Leave nodeName out and select {NODE} by the label {k8s.HOSTNAME_LABEL}.",
    )
    k8s.written_and_applied(
        learner.file(POD), live, "Pod", "research/a100-job", check_job(k8s.lab_nodes(live, lab.environment.node_names))
    )


def allocatable_hint(live):
    """For ALLOCATABLE=4: the node still allocates 4 (only capacity was patched), or the file misreads it."""
    shown = dig(live.get("Node", NODE) or {}, "status", "allocatable", "nvidia.com/gpu")
    if str(shown) == "0":
        return f"{NODE} reports allocatable nvidia.com/gpu 0 now: record what its status.allocatable says, not its capacity."
    return "Patch allocatable, not only capacity, to 0."


def test_allocation_report(learner, live):
    answers.expect_answers(
        learner.file(REPORT),
        {
            "CAPACITY": answers.number(4, why="capacity stayed 4", if_empty=JSONPATH_DOTS),
            "ALLOCATABLE": answers.number(
                0, why="the patch set allocatable to 0", hints={4: allocatable_hint(live)}, if_empty=JSONPATH_DOTS
            ),
            "REASON": scheduler_s_message(live),
        },
    )


def plain(text):
    return " ".join(str(text).split()).rstrip(".").lower()


def scheduler_said(live):
    """What the scheduler said of a100-job: its PodScheduled condition's message and its FailedScheduling events'."""
    pod = live.get("Pod", "research/a100-job")
    said = [k8s.condition(pod, "PodScheduled").get("message")] if pod else []
    # The first events by name, which is by time: what the scheduler said while the learner looked (a busy cluster
    # makes it say more since, and the read stays the same size).
    events = live.list("Event", "research", fields="involvedObject.name=a100-job,reason=FailedScheduling", limit=20)
    said += [event.get("message") for event in events if event.get("reason") == "FailedScheduling"]
    return [message for message in said if isinstance(message, str) and message.strip()]


def scheduler_s_message(live):
    """The scheduler's own message, or a part of it, naming the GPUs: not one written from memory. Where the
    cluster keeps none (its events gone), a message naming Insufficient nvidia.com/gpu is taken."""
    said = scheduler_said(live)

    def accepts(written):
        return GPUS.lower() in plain(written) and (not said or any(plain(written) in plain(m) for m in said))

    def hint(written):
        if "taint" in written.lower():
            return "The job must tolerate the reservation taint; then only the GPUs stop it."
        if GPUS.lower() in written.lower() and said:
            return (
                f'Copy the scheduler\'s own words for a100-job (kubectl describe pod a100-job -n research): "{said[0]}"'
            )
        return None

    return answers.Answer(Words(f'the scheduler\'s message for a100-job, naming "{GPUS}"'), accepts, None, hint)
