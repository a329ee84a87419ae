"""Written and applied: an object the learner writes in a file and applies to the cluster.

:func:`written_and_applied` runs one check on both sides and says which side
is wrong: the file ("k8s/gpu-pod.yaml: spec.runtimeClassName should be
nvidia, found nothing."), the cluster when the file is right but was not
applied again, or the API server's own refusal of the file when the object
is missing because the apply failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from ..feedback import StepFailed, fail, listed
from ..learner import LearnerFile
from ..live import LiveCluster, split_name
from ..parsing import misplaced

Check = Callable[[dict[str, Any]], None]


def _checked(check: Check, obj: dict[str, Any], before: str, after: str = "") -> None:
    __tracebackhide__ = True
    try:
        check(obj)
    except StepFailed as error:
        raise StepFailed(f"{before}{error.message}{after}", hint=error.hint, detail=error.detail or obj) from None


IMMUTABLE = {"Pod": "a Pod's spec", "RuntimeClass": "a RuntimeClass's handler"}  # what `kubectl apply` cannot change


def _reapply(kind: str, file: LearnerFile) -> str:
    if kind in IMMUTABLE:
        return f" {file} is right: {IMMUTABLE[kind]} cannot change in place, so delete the {kind} and apply the file again."
    return (
        f" {file} is right: put it in the cluster with kubectl replace -f {file} "
        "(kubectl apply keeps what other commands, such as kubectl patch, changed)."
    )


def not_applied(live: LiveCluster, file: LearnerFile, kind: str, name: str, written: dict[str, Any]) -> NoReturn:
    """The object is not in the cluster: why the API server refuses the file, if it does.

    Example:: not_applied(live, learner.file(FILE), "DaemonSet", DS, written)
    """
    __tracebackhide__ = True
    refusal = live.refusal(written)
    if refusal and "already exists" in refusal:
        fail(
            f"The {kind} {name} could not be read, though the API server says it already exists: it is being "
            "deleted, or was made while the grader read the cluster. Wait until kubectl get shows it settled, then "
            "grade again.",
            detail={"written": written, "refusal": refusal},
        )
    if refusal:
        fail(
            f"The {kind} {name} is not in the cluster: the API server refuses {file} ({refusal}).",
            hint=f"Fix the file, then apply it: kubectl apply -f {file}.",
            detail={"written": written},
        )
    namespace, bare = split_name(name)
    elsewhere = [] if namespace is None else live.list(kind, fields=f"metadata.name={bare}")
    others = sorted({str((obj.get("metadata") or {}).get("namespace")) for obj in elsewhere} - {namespace})
    if others:
        fail(
            f"The {kind} {name} is not in the cluster: {bare} is in {listed(others)} instead. Apply {file} to "
            f"{namespace} (kubectl apply -n {namespace} -f {file}) and delete the one in {listed(others)}.",
            detail={"written": written},
        )
    fail(
        f"The {kind} {name} is not in the cluster; apply {file} (kubectl apply -f {file}).", detail={"written": written}
    )


def written_and_applied(file: LearnerFile, live: LiveCluster, kind: str, name: str, check: Check) -> dict[str, Any]:
    """``check`` the ``kind`` object ``name`` ("namespace/name") in ``file``, then the same object live.

    ``check`` receives the object and fails (``expect``, ``expect_value``) with a message
    about its fields; this function adds which side is wrong. Returns the live object.

    Example:: written_and_applied(learner.file("k8s/gpu-pod.yaml"), live, "Pod", "gpu-lab/cuda-probe", check_pod)
    """
    __tracebackhide__ = True
    namespace, bare = split_name(name)
    written = file.object(kind, bare, applied_to=namespace)  # a file without a namespace takes the one applied to
    _checked(check, written, f"{file}: ")
    applied = live.get(kind, bare, namespace)
    if applied is None:
        not_applied(live, file, kind, name, written)
    _checked(check, applied, f"In the cluster, the {kind} {name}: ", _reapply(kind, file))
    return applied


def misplaced_key(obj: Any, *path: str) -> str | None:
    """A diagnosis for a key missing at ``path`` but written elsewhere in the object: both places, as dotted keys.

    Example:: hint=k8s.misplaced_key(sharing, "sharing", "timeSlicing", "failRequestsGreaterThanOne")
    """
    return misplaced(obj, *path)
