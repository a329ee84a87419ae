"""Reading Kubernetes objects as an operator does: containers, requests, rollouts, scheduling, advertised resources.

Plain functions over the dicts the API server returns (and over manifests as
written), shared by the labs' graders so a step module says only what it checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..feedback import Words, blocked_unless, expect, expect_value, fail, listed, should_be, shown
from ..live import LiveCluster
from ..parsing import dig
from ..values import quantity_bytes

Obj = Mapping[str, Any]


def containers(obj: Obj | None) -> list[dict[str, Any]]:
    """The containers of a Pod, or of a workload's Pod template.

    Example:: containers(daemonset)[0]["image"]
    """
    found = dig(obj, "spec", "containers") or dig(obj, "spec", "template", "spec", "containers")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def request(obj: Obj | None, resource: str, kind: str = "requests") -> Any:
    """The first container's ``resources.<kind>.<resource>`` as written (``64Gi``, ``1``), or None.

    Example:: request(pod, "memory")  # "64Gi"; request(pod, "nvidia.com/gpu", "limits")
    """
    return next((value for c in containers(obj) if (value := dig(c, "resources", kind, resource)) is not None), None)


def _written(container: Obj, resource: str) -> Any:
    """One container's request of ``resource`` as written; its limit when it sets only a limit (the API server's default)."""
    asked = dig(container, "resources", "requests", resource)
    return dig(container, "resources", "limits", resource) if asked is None else asked


def effective_request(obj: Obj | None, resource: str) -> float | None:
    """How much of ``resource`` a Pod (a workload's Pod template, a ControllerRevision's ``data``) asks for,
    as the scheduler counts it: each container's request, or its limit where it sets only a limit (the
    API server defaults requests from limits), summed; an init container's, or a sidecar's, as Kubernetes
    adds them. A number, so every spelling is one amount (``1``, ``"1"``, ``1000m``; ``1Gi``, ``1024Mi``);
    None when no container asks for it, or an amount is not a quantity. ``spec.overhead`` is not included.

    Example:: effective_request(live.get("Pod", "gpu-rt/over"), "cpu")  # 0.9, written as requests or limits
    """
    spec = dig(obj, "spec", "template", "spec") if dig(obj, "spec", "template") is not None else dig(obj, "spec")
    inits = [c for c in dig(spec, "initContainers", default=[]) or [] if isinstance(c, dict)]
    written = [(c, _written(c, resource)) for c in [*containers(obj), *inits]]
    amounts = {id(c): quantity_bytes(value) for c, value in written if value is not None}
    if not amounts or None in amounts.values():
        return None
    sidecars = peak = 0.0
    for init in inits:
        amount = amounts.get(id(init)) or 0.0
        if init.get("restartPolicy") == "Always":
            sidecars += amount
        else:
            peak = max(peak, sidecars + amount)
    return round(max(peak, sidecars + sum(amounts.get(id(c)) or 0.0 for c in containers(obj))), 9)


def image_and_memory(obj: Obj | None) -> tuple[str | None, float | None]:
    """(image, memory request in bytes) of the first container: what tells two specs of one workload apart.

    ``obj`` is a Pod, a workload, or a ControllerRevision's ``data``; the memory is the effective request
    (:func:`effective_request`: a limit alone counts as the request), in any spelling.

    Example:: image_and_memory(pod)  # ("nvcr.io/nvidia/k8s/container-toolkit:v1.17.0", 68719476736.0)
    """
    image = dig(containers(obj), 0, "image")
    return image if isinstance(image, str) else None, effective_request(obj, "memory")


@dataclass(frozen=True)
class Rollout:
    """A DaemonSet's numbers as ``kubectl get ds`` shows them.

    Example:: Rollout.of(live.get("DaemonSet", DS)) == Rollout(desired=3, updated=1, ready=2)
    """

    desired: int | None
    updated: int
    ready: int

    @classmethod
    def of(cls, ds: Obj) -> Rollout:
        status = ds.get("status") or {}
        return cls(
            status.get("desiredNumberScheduled"), status.get("updatedNumberScheduled", 0), status.get("numberReady", 0)
        )

    def __str__(self) -> str:
        return f"desired {self.desired}, updated {self.updated}, ready {self.ready}"


def condition(obj: Obj | None, kind: str) -> dict[str, Any]:
    """The status condition of ``kind`` (``PodScheduled``), or an empty dict.

    Example:: condition(pod, "PodScheduled").get("status") == "True"
    """
    conditions = dig(obj, "status", "conditions", default=[]) or []
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})


def where_it_is(pod: Obj | None) -> str:
    """Where a Pod is, as the cluster says it: "Running on lab-node-0", or, for one the scheduler could not place,
    "Pending: the scheduler says ..." with its own reason (the PodScheduled condition's message).

    Example:: f"cuda-probe should run on lab-node-0; it is {where_it_is(pod)}."
    """
    if pod is None:
        return "not in the cluster"
    phase, node = dig(pod, "status", "phase") or "Pending", dig(pod, "spec", "nodeName")
    if node:
        return f"{phase} on {node}"
    scheduled = condition(pod, "PodScheduled")
    message = " ".join(str(scheduled.get("message") or "").split())
    if scheduled.get("status") == "False" and message:
        return (
            f'{phase}, not scheduled: the scheduler says "{message if len(message) <= 160 else message[:157] + "..."}"'
        )
    return f"{phase}, not yet scheduled (the scheduler has given no reason yet)"


def unschedulable_because(pod: Obj | None, words: str) -> bool:
    """Whether the Pod waits unscheduled with ``words`` (``Insufficient memory``) in the scheduler's message.

    Example:: live.wait_for("Pod", "gpu-rt/over", lambda p: unschedulable_because(p, "Insufficient cpu"), 20)
    """
    scheduled = condition(pod, "PodScheduled")
    return (
        dig(pod, "status", "phase") == "Pending"
        and scheduled.get("status") == "False"
        and words in (scheduled.get("message") or "")
    )


def advertised(node: Obj | None, resource: str) -> tuple[Any, Any]:
    """(capacity, allocatable) of ``resource`` in a node's status, as strings or None.

    Example:: advertised(live.get("Node", "lab-node-0"), "nvidia.com/gpu")  # ("4", "4")
    """
    return dig(node, "status", "capacity", resource), dig(node, "status", "allocatable", resource)


def expect_advertises(
    live: LiveCluster, node_name: str, resource: str, amount: str, others: Sequence[str] = ()
) -> dict[str, Any]:
    """The node advertises ``amount`` of ``resource`` in both capacity and allocatable, as a device plugin would.

    ``others`` are the nodes that must not: one of them advertising ``amount`` instead names the node mixed up.

    Example:: expect_advertises(live, "lab-node-0", "nvidia.com/gpu", "4", others=["lab-node-1"])
    """
    __tracebackhide__ = True
    node = live.get("Node", node_name)
    expect(node, f"The node {node_name} is not in the cluster.")
    capacity, allocatable = advertised(node, resource)
    if capacity is None and allocatable is None:
        instead = [other for other in others if amount in advertised(live.get("Node", other), resource)]
        expect(
            not instead,
            f'{node_name} does not advertise {resource}, but {listed(instead)} advertises "{amount}": patch {node_name}\'s status.',
        )
        fail(
            f"{node_name} does not advertise {resource}.",
            hint=f"Node status is a separate subresource: a plain patch is ignored. Use kubectl patch node {node_name} --subresource=status.",
        )
    expect(
        capacity == amount and allocatable == amount,
        f'{node_name} should advertise {resource} "{amount}" in both capacity and allocatable, '
        f"found capacity {shown(capacity)}, allocatable {shown(allocatable)}.",
        hint="The scheduler looks at allocatable; fill in both." if None in (capacity, allocatable) else None,
        detail=dig(node, "status"),
    )
    return dict(node or {})


def expect_advertises_none(live: LiveCluster, node_names: Sequence[str], resource: str, amount: str) -> None:
    """None of these nodes advertises ``amount`` of ``resource``: the lab changed other nodes only.

    Example:: expect_advertises_none(live, ["lab-node-0", "lab-node-2"], "nvidia.com/gpu", "20")
    """
    __tracebackhide__ = True
    wrong = [name for name in node_names if amount in advertised(live.get("Node", name), resource)]
    expect(not wrong, f'{listed(wrong)} also advertises {resource} "{amount}"; only the node the step names should.')


def _term_matches(term: Obj, labels: Mapping[str, str]) -> bool:
    """One nodeSelectorTerm: every matchExpression holds for the node's labels."""
    for expression in term.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        held = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(str(operator), False)
        if not held:
            return False
    return bool(term.get("matchExpressions"))


def selects(pod: Obj, node: Obj | None) -> bool:
    """Whether the Pod's nodeSelector and required node affinity allow ``node`` (by its labels).

    Example:: selects(pod, live.get("Node", "gpu-tight-a"))
    """
    labels = dig(node, "metadata", "labels") or {}
    selector = dig(pod, "spec", "nodeSelector") or {}
    if any(labels.get(key) != str(value) for key, value in selector.items()):
        return False
    terms = dig(
        pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
    )
    return not terms or any(_term_matches(term, labels) for term in terms if isinstance(term, dict))


def pins_to(pod: Obj) -> bool:
    """Whether the Pod restricts its nodes at all (a nodeSelector or a required node affinity).

    Example:: pins_to(learner.file(OVERHEAD).object("Pod", "fits"))
    """
    affinity = dig(pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    return bool(dig(pod, "spec", "nodeSelector") or affinity)


def handlers_of(runtimeclasses: list[dict[str, Any]]) -> set[str]:
    """The handlers a set of RuntimeClasses asks the nodes' runtimes for.

    Example:: handlers_of(live.list("RuntimeClass"))  # {"nvidia", "nvidia-cdi"}
    """
    return {handler for rc in runtimeclasses if isinstance(handler := rc.get("handler"), str) and handler}


def required_handlers(live: LiveCluster, *, made_by: str) -> set[str]:
    """The handlers the cluster's RuntimeClasses ask for; the step is blocked while they ask for none
    but runc, naming the step ``made_by`` that creates them.

    Example:: required_handlers(lab_cluster.live_or_fail(), made_by="step 1")  # {"runc", "nvidia"}
    """
    __tracebackhide__ = True
    handlers = handlers_of(live.list("RuntimeClass"))
    blocked_unless(handlers - {"runc"}, f"a RuntimeClass to check against, which {made_by} creates,")
    return handlers


def check_runtimeclass(handler: str | None = None) -> Callable[[dict[str, Any]], None]:
    """A check for a RuntimeClass manifest (node.k8s.io/v1, a top-level handler), and its handler if given.

    Example:: written_and_applied(file, live, "RuntimeClass", "nvidia", check_runtimeclass("nvidia"))
    """

    def check(runtimeclass: dict[str, Any]) -> None:
        expect_value(runtimeclass.get("apiVersion"), "node.k8s.io/v1", "the RuntimeClass apiVersion")
        found = runtimeclass.get("handler")
        if found is None and dig(runtimeclass, "spec", "handler") is not None:
            fail(
                "handler is under spec.",
                hint="A RuntimeClass has no spec: handler is a top-level field, beside metadata.",
            )
        expect(isinstance(found, str) and found, should_be("the RuntimeClass handler", Words("a name"), found))
        if handler is not None:
            binary = isinstance(found, str) and ("/" in found or "container-runtime" in found)
            hint = (
                f"A handler names containerd's runtime table (runtimes.{handler}), not the program the runtime runs "
                "(its BinaryName)."
            )
            expect_value(found, handler, "the RuntimeClass handler", hint=hint if binary else None, detail=runtimeclass)

    return check
