"""Ways to read gpunode's objects for its three checkers: the right one, and the ways a learner's checker reads less
than the whole object (the first key of a selector, the first condition, a default, a name for an owner, a key for a
label). Each is a plain function of the objects (as the API server writes them), so a test can ask which near miss
changes which reading's output (tests/test_near_misses.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Objects = list[Obj]
OPERATOR = "nvidia-gpu-operator"
TAINTED = "lab-node-2"
SYSTEM = "node.kubernetes.io/"


def _of(objects: Objects, kind: str, namespace: str | None = None) -> Objects:
    return [o for o in objects if o.get("kind") == kind and (namespace is None or _ns(o) == namespace)]


def _ns(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _selector(ds: Obj) -> dict[str, str]:
    return (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}


def _owner(pod: Obj) -> str | None:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((str(ref.get("name")) for ref in refs if ref.get("kind") == "DaemonSet"), None)


def _coverage(
    objects: Objects,
    selects: Callable[[dict[str, str], dict[str, str]], bool],
    owner: Callable[[Obj, list[str]], str | None] = lambda pod, _: _owner(pod),
    skip: Callable[[Obj], bool] = lambda ds: False,
) -> frozenset[str]:
    daemonsets = [ds for ds in _of(objects, "DaemonSet", OPERATOR) if not skip(ds)]
    names = [_name(ds) for ds in daemonsets]
    pods = [p for p in _of(objects, "Pod", OPERATOR) if not (_owner(p) and p["spec"].get("nodeName") == TAINTED)]
    running = {(owner(pod, names), pod["spec"].get("nodeName")) for pod in pods}
    return frozenset(
        f"MISSING={_name(ds)}/{_name(node)}"
        for ds in daemonsets
        for node in _of(objects, "Node")
        if selects(_selector(ds), _labels(node)) and (_name(ds), _name(node)) not in running
    )


def _by_prefix(pod: Obj, names: list[str]) -> str | None:
    return next((name for name in names if _name(pod).startswith(name + "-")), None)


COVERAGE: dict[str, Callable[[Objects], frozenset[str]]] = {
    "right": lambda o: _coverage(o, lambda sel, lab: all(lab.get(k) == str(v) for k, v in sel.items())),
    "first key of the selector": lambda o: _coverage(
        o, lambda sel, lab: all(lab.get(k) == str(v) for k, v in sorted(sel.items())[:1])
    ),
    "last key of the selector": lambda o: _coverage(
        o, lambda sel, lab: all(lab.get(k) == str(v) for k, v in sorted(sel.items())[-1:])
    ),
    "label keys, not values": lambda o: _coverage(o, lambda sel, lab: all(k in lab for k in sel)),
    "skips a DaemonSet without a nodeSelector": lambda o: _coverage(
        o, lambda sel, lab: all(lab.get(k) == str(v) for k, v in sel.items()), skip=lambda ds: not _selector(ds)
    ),
    "owner by the Pod's name": lambda o: _coverage(
        o, lambda sel, lab: all(lab.get(k) == str(v) for k, v in sel.items()), owner=_by_prefix
    ),
}


def _conditions(obj: Obj) -> list[Obj]:
    return list((obj.get("status") or {}).get("conditions") or [])


def _condition(obj: Obj, kind: str) -> Obj:
    return next((c for c in _conditions(obj) if c.get("type") == kind), {})


def _minutes_since(stamp: object, now: datetime) -> float:
    return (now - datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))).total_seconds() / 60


def _stale(
    objects: Objects, now: datetime, minutes: float, which: Callable[[Obj], Obj], status: str = "True"
) -> frozenset[str]:
    found = set()
    for pool in _of(objects, "MachineConfigPool"):
        chosen = which(pool)
        if chosen.get("status") == status and _minutes_since(chosen.get("lastTransitionTime"), now) > minutes:
            found.add(f"STALE={_name(pool)}")
    return frozenset(found)


def stale_readings(now: datetime) -> dict[str, Callable[[Objects], frozenset[str]]]:
    """mcp-stale.sh with no argument (the default, 30 minutes)."""
    updating = lambda pool: _condition(pool, "Updating")  # noqa: E731
    return {
        "right": lambda o: _stale(o, now, 30, updating),
        "a day by default": lambda o: _stale(o, now, 24 * 60, updating),
        "the first condition": lambda o: _stale(o, now, 30, lambda pool: (_conditions(pool) or [{}])[0]),
        "Updated False for Updating": lambda o: _stale(o, now, 30, lambda pool: _condition(pool, "Updated"), "False"),
    }


def _blockers(
    objects: Objects,
    *,
    ready: bool = True,
    effects: tuple[str, ...] = ("NoSchedule", "NoExecute"),
    system: Callable[[str], bool] = lambda key: key.startswith(SYSTEM),
    updating: Callable[[Obj], bool] = lambda pool: _condition(pool, "Updating").get("status") == "True",
    short_gpus: bool = False,
) -> frozenset[str]:
    found = {f"BLOCKED=mcp/{_name(p)}" for p in _of(objects, "MachineConfigPool") if updating(p)}
    for node in _of(objects, "Node"):
        spec, status = node.get("spec") or {}, node.get("status") or {}
        if (ready and _condition(node, "Ready").get("status") != "True") or spec.get("unschedulable"):
            found.add(f"BLOCKED=node/{_name(node)}")
        for taint in spec.get("taints") or []:
            if taint.get("effect") in effects and not system(str(taint.get("key"))):
                found.add(f"BLOCKED=taint/{_name(node)}/{taint.get('key')}")
        gpus = (
            (status.get("capacity") or {}).get("nvidia.com/gpu"),
            (status.get("allocatable") or {}).get("nvidia.com/gpu"),
        )
        if short_gpus and gpus[0] is not None and int(gpus[1] or 0) < int(gpus[0]):
            found.add(f"BLOCKED=node/{_name(node)}")
    return frozenset(found)


GATE: dict[str, Callable[[Objects], frozenset[str]]] = {
    "right": _blockers,
    "no Ready check": lambda o: _blockers(o, ready=False),
    "every taint effect": lambda o: _blockers(o, effects=("NoSchedule", "NoExecute", "PreferNoSchedule")),
    "any key holding kubernetes.io/ exempt": lambda o: _blockers(o, system=lambda key: "kubernetes.io/" in key),
    "the first condition for Updating": lambda o: _blockers(
        o,
        updating=lambda p: (
            (_conditions(p) or [{}])[0].get("type") == "Updating"
            and (_conditions(p) or [{}])[0].get("status") == "True"
        ),
    ),
    "Updated False for Updating": lambda o: _blockers(
        o, updating=lambda p: _condition(p, "Updated").get("status") == "False"
    ),
    "right, and also a node short of GPUs (may add)": lambda o: _blockers(o, short_gpus=True),
}


def readings(now: datetime | None = None) -> dict[int, dict[str, Callable[[Objects], frozenset[str]]]]:
    """Each checker's readings, by step: 4 coverage, 6 the stale alert (default threshold), 7 the gate."""
    return {4: COVERAGE, 6: stale_readings(now or datetime.now(UTC)), 7: GATE}
