"""Nodes as an operator reads them: taints and tolerations, readiness and cordons, and which
nodes a DaemonSet should cover against the Pods it really has there.

Plain functions over the dicts the API server returns, so a grader can compute the truth a
learner's checker must find. Usable without pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from ...labs.labfile import HOSTNAME_LABEL
from ..feedback import fail
from ..live import LiveCluster
from ..parsing import dig
from .kube import condition, unschedulable_because

Obj = Mapping[str, Any]
SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"
"""The prefix of the taints the cluster itself sets (unschedulable, not-ready, ...).

Example:: [t for t in tolerations(ds) if not str(t.get("key") or "").startswith(SYSTEM_TAINT_PREFIX)]
"""
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def name_of(obj: Obj | None) -> str:
    """``metadata.name``, or ``""`` when there is none.

    Example:: name_of(live.get("Node", "lab-node-0"))  # "lab-node-0"
    """
    return str(dig(obj, "metadata", "name") or "")


def taints(node: Obj | None) -> list[dict[str, Any]]:
    """The node's taints (``spec.taints``), each a dict.

    Example:: any(t.get("key") == "ai4dd-a100-reserved" for t in taints(node))
    """
    found = dig(node, "spec", "taints") or []
    return [taint for taint in found if isinstance(taint, dict)]


def tolerations(workload: Obj) -> list[dict[str, Any]]:
    """The tolerations of a Pod, or of a workload's Pod template.

    Example:: tolerations(daemonset)  # the Pod template's, for a workload
    """
    found = dig(workload, "spec", "tolerations") or dig(workload, "spec", "template", "spec", "tolerations") or []
    return [toleration for toleration in found if isinstance(toleration, dict)]


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """The scheduler's rule: an empty key with Exists matches every taint; an empty effect every effect.

    Example:: any(tolerates(toleration, taint) for toleration in tolerations(pod))
    """
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration.get("key") != taint.get("key"):
        return False
    return operator == "Exists" or str(toleration.get("value") or "") == str(taint.get("value") or "")


def is_custom(taint: Obj) -> bool:
    """A blocking taint somebody put there by hand, not one the cluster manages itself.

    Example:: [taint for taint in taints(node) if is_custom(taint)]
    """
    return taint.get("effect") in BLOCKING_EFFECTS and not str(taint.get("key", "")).startswith(SYSTEM_TAINT_PREFIX)


def is_ready(node: Obj | None) -> bool:
    """Whether the node's Ready condition is True.

    Example:: [name_of(node) for node in lab_nodes(live, names) if not is_ready(node)]
    """
    return condition(node, "Ready").get("status") == "True"


def is_cordoned(node: Obj | None) -> bool:
    """Whether the node is cordoned (``spec.unschedulable``).

    Example:: is_cordoned(live.get("Node", "lab-node-2"))
    """
    return dig(node, "spec", "unschedulable") is True


def labels_match(selector: Obj | None, node: Obj | None) -> bool:
    """Whether the node's labels hold every ``key: value`` of a nodeSelector.

    Example:: labels_match({"nvidia.com/gpu.present": "true"}, node)
    """
    labels = dig(node, "metadata", "labels") or {}
    return all(labels.get(key) == str(value) for key, value in (selector or {}).items())


def daemonset_owner(pod: Obj) -> str | None:
    """The name of the DaemonSet that owns the Pod, or None.

    Example:: [pod for pod in live.list("Pod", OPERATOR) if daemonset_owner(pod)]
    """
    owners = dig(pod, "metadata", "ownerReferences") or []
    return next(
        (str(ref.get("name")) for ref in owners if isinstance(ref, dict) and ref.get("kind") == "DaemonSet"), None
    )


def uncovered(daemonsets: Sequence[Obj], nodes: Sequence[Obj], pods: Sequence[Obj]) -> set[str]:
    """``daemonset/node`` for each node the DaemonSet's nodeSelector matches that runs no Pod of it."""
    running = {(daemonset_owner(pod), dig(pod, "spec", "nodeName")) for pod in pods}
    return {
        f"{name_of(ds)}/{name_of(node)}"
        for ds in daemonsets
        for node in nodes
        if labels_match(dig(ds, "spec", "template", "spec", "nodeSelector"), node)
        and (name_of(ds), name_of(node)) not in running
    }


def selected_nodes(live: LiveCluster, daemonsets: Sequence[Obj]) -> list[Obj]:
    """The nodes the DaemonSets' nodeSelectors match, each asked of the API server by its selector."""
    found: dict[str | None, Obj] = {}
    for ds in daemonsets:
        selector = dig(ds, "spec", "template", "spec", "nodeSelector") or {}
        found |= {name_of(node): node for node in live.list("Node", labels={k: str(v) for k, v in selector.items()})}
    return list(found.values())


def lab_nodes(live: LiveCluster, names: Sequence[str], *, allow_empty: bool = False) -> list[Obj]:
    """The lab's own nodes, in one read by their hostname label: other nodes of a big cluster are not read.
    None found fails the check, unless ``allow_empty``.

    Example:: lab_nodes(live, lab.environment.node_names)
    """
    __tracebackhide__ = True
    nodes: list[Obj] = list(live.list("Node", labels=f"{HOSTNAME_LABEL} in ({','.join(names)})")) if names else []
    if not nodes and not allow_empty:
        fail(
            f"None of the lab's nodes ({', '.join(names) or 'none named'}) is in the cluster, so there was nothing "
            "to check; grade against the lab's own cluster (kubectl get nodes).",
            detail={"names": list(names)},
        )
    return nodes


def coverage_gaps(
    live: LiveCluster, namespace: str, hidden: AbstractSet[tuple[str, str]] = frozenset(), *, allow_empty: bool = False
) -> set[str]:
    """:func:`uncovered` for the DaemonSets of ``namespace`` as the cluster is now, minus the ``hidden`` Pods. A
    namespace without DaemonSets has no coverage to judge: it fails the check, unless ``allow_empty``.

    Example:: coverage_gaps(live, "nvidia-gpu-operator")  # {"gpu-feature-discovery/lab-node-2"}
    """
    __tracebackhide__ = True
    pods = [
        pod for pod in live.list("Pod", namespace) if (dig(pod, "metadata", "namespace"), name_of(pod)) not in hidden
    ]
    daemonsets = live.list("DaemonSet", namespace)
    if not daemonsets and not allow_empty:
        fail(
            f"The namespace {namespace} has no DaemonSet in the cluster, so there is no coverage to check; "
            f"make sure the lab's DaemonSets are there (kubectl get daemonsets -n {namespace}).",
            detail={"namespace": namespace},
        )
    return uncovered(daemonsets, selected_nodes(live, daemonsets), pods)


def added_by_runtimeclass(pod: Obj | None, runtimeclass: Obj | None) -> str | None:
    """A diagnosis for a Pod the scheduler cannot place for its selector, where the selector is not the Pod's own:
    its RuntimeClass's ``scheduling.nodeSelector``, which the API server adds to every Pod that names the class.

    Example:: hint=k8s.added_by_runtimeclass(pod, live.get("RuntimeClass", "nvidia-overhead"))
    """
    added = dig(runtimeclass, "scheduling", "nodeSelector") or {}
    if not isinstance(added, dict) or not added or not unschedulable_because(pod, "node affinity/selector"):
        return None
    selector = dig(pod, "spec", "nodeSelector") or {}
    carried = {key: value for key, value in added.items() if selector.get(key) == value}
    if not carried:
        return None
    pairs = ", ".join(f"{key}={value}" for key, value in carried.items())
    name = dig(runtimeclass, "metadata", "name")
    return (
        f"The selector {pairs} is not the Pod's own: the RuntimeClass {name} adds it from its scheduling.nodeSelector "
        "to every Pod that names the class, and the Pod's node does not carry it."
    )


def names_for_handlers(runtimeclasses: Sequence[Obj]) -> Callable[[set[str]], str | None]:
    """A diagnosis for a checker's findings that are RuntimeClass names, not handlers (``.metadata.name`` read for
    ``.handler``): a hint for ``Case(hint=...)`` that sees the findings printed.

    Example:: Case(given, args, expected=expected, hint=k8s.names_for_handlers(live.list("RuntimeClass")))
    """
    handlers = {str(rc.get("handler")) for rc in runtimeclasses}
    named = {str(dig(rc, "metadata", "name")): rc.get("handler") for rc in runtimeclasses}
    only_names = {name: handler for name, handler in named.items() if name not in handlers}

    def hint(printed: set[str]) -> str | None:
        took = sorted(value for line in printed if (value := line.partition("=")[2]) in only_names)
        if not took:
            return None
        pairs = ", ".join(f"{name}'s is {only_names[name]}" for name in took[:3])
        return (
            f"{' and '.join(took[:3])} {'is a RuntimeClass name' if len(took) == 1 else 'are RuntimeClass names'}, "
            f"not handlers ({pairs}): read each class's .handler, the runtime containerd must load."
        )

    return hint
