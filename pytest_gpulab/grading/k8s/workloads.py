"""The objects a workload owns, for every kind a helper accepts, and never an empty list taken for a pass.

A check that loops over a workload's Pods checks nothing when there are none: "every Pod asks for one GPU"
holds of no Pods. So these helpers fail the check with a sentence when they find nothing, unless the step
says that nothing is a right answer (``allow_empty=True``), and refuse a kind they do not know with a
:class:`GradingError` naming it, rather than pairing it wrongly. Usable without pytest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..feedback import GradingError, fail
from ..live import LiveCluster, owned_by
from ..parsing import dig

Obj = Mapping[str, Any]

POD_OWNERS = ("DaemonSet", "Deployment", "Job", "ReplicaSet", "StatefulSet")  # a Deployment through its ReplicaSets
REVISED = ("DaemonSet", "StatefulSet")  # the kinds whose specs the API server keeps as ControllerRevisions


def selector_labels(workload: Obj) -> dict[str, str] | None:
    """The workload's matchLabels, to ask the API server for fewer objects (owners still decide)."""
    labels = dig(workload, "spec", "selector", "matchLabels")
    return dict(labels) if isinstance(labels, dict) else None


def described(workload: Obj) -> str:
    """``Deployment team-a/trainer``, as a learner reads it."""
    kind, name = workload.get("kind") or "object", dig(workload, "metadata", "name") or "?"
    namespace = dig(workload, "metadata", "namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _known(workload: Obj, kinds: tuple[str, ...], helper: str) -> str:
    kind = workload.get("kind")
    if kind not in kinds:
        raise GradingError(
            f"The grader asked {helper} for the objects of a {kind or 'kindless object'}, a kind it cannot pair; "
            "this is the grader's mistake, not yours.",
            detail={"helper": helper, "kind": kind, "accepted": list(kinds)},
        )
    return str(kind)


def found(objects: list[dict[str, Any]], workload: Obj, what: str, allow_empty: bool) -> list[dict[str, Any]]:
    """``objects``, or the check failed with a sentence when there are none and none is not a right answer."""
    __tracebackhide__ = True
    if not objects and not allow_empty:
        fail(
            f"{described(workload)} has no {what} in the cluster, so there was nothing to check; make sure it "
            "is applied and its controller has made them (kubectl get "
            f"{what.lower()} -n {dig(workload, 'metadata', 'namespace') or 'default'}).",
            detail={"workload": described(workload), "uid": dig(workload, "metadata", "uid"), "found": what},
        )
    return objects


def pods_of(live: LiveCluster, workload: Obj, *, allow_empty: bool = False) -> list[dict[str, Any]]:
    """The Pods a workload owns: a DaemonSet's, StatefulSet's, Job's or ReplicaSet's own, and a Deployment's
    through its ReplicaSets (every revision's, old and new). None fails the check, unless ``allow_empty``.

    Example:: [request(pod, "nvidia.com/gpu") for pod in pods_of(live, live.get("Deployment", "team-a/trainer"))]
    """
    __tracebackhide__ = True
    namespace = dig(workload, "metadata", "namespace")
    owners: Sequence[Obj] = [workload]
    if _known(workload, POD_OWNERS, "pods_of") == "Deployment":
        owners = owned_by(live.list("ReplicaSet", namespace, labels=selector_labels(workload)), workload)
    pods = live.list("Pod", namespace, labels=selector_labels(workload)) if owners else []
    return found([pod for owner in owners for pod in owned_by(pods, owner)], workload, "Pods", allow_empty)


def revisions_of(live: LiveCluster, workload: Obj, *, allow_empty: bool = False) -> list[dict[str, Any]]:
    """The ControllerRevisions of a DaemonSet or StatefulSet: one per spec it has had. None fails the check,
    unless ``allow_empty``.

    Example:: [image_and_memory(r.get("data")) for r in revisions_of(live, daemonset)]
    """
    __tracebackhide__ = True
    _known(workload, REVISED, "revisions_of")
    namespace = dig(workload, "metadata", "namespace")
    revisions = owned_by(live.list("ControllerRevision", namespace, labels=selector_labels(workload)), workload)
    return found(revisions, workload, "ControllerRevisions", allow_empty)


DAEMONSET_NUMBERS = {
    "desiredNumberScheduled": "the nodes that should run its Pod",
    "currentNumberScheduled": "the nodes running any of its Pods, of the old template or the new",
    "updatedNumberScheduled": "the nodes running a Pod of its current template",
    "numberReady": "the nodes whose Pod is Ready",
    "numberAvailable": "the nodes whose Pod has been Ready for minReadySeconds",
    "numberMisscheduled": "the nodes running its Pod that should not",
}


def misread_numbers(workload: Obj, field: str) -> dict[int, str]:
    """A diagnosis for a DaemonSet number read from the wrong status field: {a value of other fields: a sentence
    naming them and ``field``}, for each value that differs from ``field``'s.

    Example:: answers.number(1, hints=k8s.misread_numbers(ds, "updatedNumberScheduled"))
    """
    status = dig(workload, "status") or {}
    asked = status.get(field, 0)
    fields: dict[int, list[str]] = {}
    for other in DAEMONSET_NUMBERS:
        value = status.get(other, 0)
        if other != field and isinstance(value, int) and value != asked:
            fields.setdefault(value, []).append(other)
    return {
        value: f"{value} is the DaemonSet's "
        + " and ".join(f"status.{other} ({DAEMONSET_NUMBERS[other]})" for other in others)
        + f"; this answer is status.{field}, {DAEMONSET_NUMBERS[field]}."
        for value, others in fields.items()
    }
