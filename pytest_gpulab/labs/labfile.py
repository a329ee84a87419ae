"""A lab's declarative file, ``lab.toml``: what the lab is and the cluster it starts with.

A lab is one folder: ``lab.toml``, its step modules (``stepN_*.py``) and its
reference solution (``reference/solve.sh``). :func:`load_lab` reads the file
and checks every key, so a typo is an error naming the file and the key
instead of a silently different cluster. Usable without pytest.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAB_FILE = "lab.toml"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUANTITY = re.compile(r"\d+(\.\d+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")


DEFAULT_CHECK_TIMEOUT = 300.0


class LabFileError(ValueError):
    """A lab.toml that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def manifest(self) -> dict[str, str]:
        return (
            {"key": self.key, "value": self.value, "effect": self.effect}
            if self.value
            else {"key": self.key, "effect": self.effect}
        )


# The label every lab node carries with its name, as a kubelet sets it (NodeSpec.manifest below): the lab's
# nodes are read by it.
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""The label every node carries with its own name: what a Pod pins a node by.

Example:: dig(pod, "spec", "nodeSelector", HOSTNAME_LABEL) == "lab-node-2"
"""


@dataclass(frozen=True)
class NodeSpec:
    """A fake node of the lab's starting cluster, kept Ready by the kwok controller."""

    name: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    resources: Mapping[str, str] = field(default_factory=dict)  # extended resources, e.g. nvidia.com/gpu
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False

    def manifest(self) -> dict[str, Any]:
        amounts = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods, **self.resources}
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [taint.manifest() for taint in self.taints]
        if self.unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", **self.annotations, "kwok.x-k8s.io/node": "fake"},
                "labels": {
                    HOSTNAME_LABEL: self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **self.labels,
                },
            },
            "spec": spec,
            "status": {"capacity": amounts, "allocatable": amounts},
        }


@dataclass(frozen=True)
class Environment:
    """The cluster a learner starts with: fake nodes, then manifests applied in order."""

    nodes: tuple[NodeSpec, ...] = ()
    objects: tuple[Path, ...] = ()

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)


@dataclass(frozen=True)
class Lab:
    name: str
    title: str
    default_root: Path
    rubric_version: str
    folder: Path
    environment: Environment = Environment()
    check_timeout: float = DEFAULT_CHECK_TIMEOUT  # seconds a check may take; a step marker's timeout= wins
    near_misses: tuple[Path, ...] = ()  # manifests of objects the lab never makes, added to a copy for checkers
    near_misses_hidden: bool = False  # their names are never shown to the learner (a check's evidence)

    @property
    def lab_file(self) -> Path:
        return self.folder / LAB_FILE

    @property
    def reference(self) -> Path:
        """The reference solution: ``reference/solve.sh ROOT [STEP ...]``."""
        return self.folder / "reference" / "solve.sh"

    @property
    def nodes(self) -> tuple[NodeSpec, ...]:
        return self.environment.nodes

    def learner_root(self, given: Path | str | None) -> Path:
        """The learner's lab directory: the one ``given`` (a setting, an option), else the lab's own."""
        return Path(given).expanduser() if given else self.default_root


class _Table:
    """One TOML table being read: every key is taken once, and what is left over is an error."""

    def __init__(self, data: Any, where: str, source: Path) -> None:
        if not isinstance(data, dict):
            raise LabFileError(f"{source}: {where} should be a table, found {type(data).__name__}.")
        self.data, self.where, self.source, self.taken = data, where, source, set[str]()

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def take(self, key: str, kind: type | tuple[type, ...], default: Any = None, *, required: bool = False) -> Any:
        self.taken.add(key)
        if key not in self.data:
            if required:
                raise LabFileError(f"{self.source}: {self._path(key)} is missing.")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise LabFileError(f"{self.source}: {self._path(key)} should be a {names}, found {value!r}.")
        return value

    def strings(self, key: str) -> dict[str, str]:
        table = self.take(key, dict, {})
        bad = [name for name, value in table.items() if not isinstance(value, str)]
        if bad:
            raise LabFileError(f"{self.source}: {self._path(key)}.{bad[0]} should be a string (write it in quotes).")
        return dict(table)

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.taken)
        if unknown:
            raise LabFileError(
                f"{self.source}: unknown key {self._path(unknown[0])}; the keys here are {', '.join(sorted(self.taken))}."
            )


def _quantity(table: _Table, key: str, default: str) -> str:
    value = str(table.take(key, (str, int), default))
    if not _QUANTITY.fullmatch(value):
        raise LabFileError(
            f"{table.source}: {table._path(key)} is {value!r}, which is not a Kubernetes quantity (e.g. 8, 500m, 32Gi)."
        )
    return value


def _taint(data: Any, where: str, source: Path) -> Taint:
    table = _Table(data, where, source)
    taint = Taint(
        table.take("key", str, required=True), table.take("effect", str, required=True), table.take("value", str, "")
    )
    table.done()
    if taint.effect not in TAINT_EFFECTS:
        raise LabFileError(f"{source}: {where}.effect is {taint.effect!r}; use one of {', '.join(TAINT_EFFECTS)}.")
    return taint


def _nodes(data: Any, where: str, source: Path) -> list[NodeSpec]:
    """One [[environment.nodes]] entry: ``name`` or ``names`` sharing the same shape."""
    table = _Table(data, where, source)
    name, names = table.take("name", str), table.take("names", list)
    if (name is None) == (names is None):
        raise LabFileError(f'{source}: {where} needs either name = "..." or names = ["...", ...].')
    shape: dict[str, Any] = {
        "cpu": _quantity(table, "cpu", NodeSpec.cpu),
        "memory": _quantity(table, "memory", NodeSpec.memory),
        "pods": _quantity(table, "pods", NodeSpec.pods),
        "resources": {key: str(value) for key, value in table.take("resources", dict, {}).items()},
        "labels": table.strings("labels"),
        "annotations": table.strings("annotations"),
        "taints": tuple(
            _taint(t, f"{where}.taints[{i}]", source) for i, t in enumerate(table.take("taints", list, []))
        ),
        "unschedulable": table.take("unschedulable", bool, False),
    }
    table.done()
    for node_name in [name] if name else names:
        if not isinstance(node_name, str) or not _NAME.fullmatch(node_name):
            raise LabFileError(
                f"{source}: {where} names a node {node_name!r}; use lower-case letters, digits and dashes."
            )
    return [NodeSpec(node_name, **shape) for node_name in ([name] if name else names)]


def _objects(patterns: list[Any], folder: Path, source: Path, key: str = "environment.objects") -> tuple[Path, ...]:
    """Manifest files named by globs relative to the lab folder, in the order written."""
    found: list[Path] = []
    for pattern in patterns:
        if not isinstance(pattern, str) or pattern.startswith("/") or ".." in Path(pattern).parts:
            raise LabFileError(f"{source}: {key} entry {pattern!r} should be a path inside the lab folder.")
        matches = sorted(path for path in folder.glob(pattern) if path.is_file())
        if not matches:
            raise LabFileError(f"{source}: {key} entry {pattern!r} matches no file in {folder}.")
        found += [path for path in matches if path not in found]
    return tuple(found)


def _environment(data: Any, folder: Path, source: Path) -> Environment:
    table = _Table(data, "environment", source)
    nodes = [
        node
        for i, entry in enumerate(table.take("nodes", list, []))
        for node in _nodes(entry, f"environment.nodes[{i}]", source)
    ]
    objects = _objects(table.take("objects", list, []), folder, source)
    table.done()
    names = [node.name for node in nodes]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise LabFileError(f"{source}: the node {twice[0]} is declared twice.")
    return Environment(tuple(nodes), objects)


def _read(source: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise LabFileError(f"{source} could not be read ({error}).") from None
    except tomllib.TOMLDecodeError as error:
        raise LabFileError(f"{source} is not valid TOML: {error}.") from None


def _positive(value: float, key: str, source: Path) -> float:
    if isinstance(value, bool) or value <= 0:
        raise LabFileError(f"{source}: {key} should be a positive number of seconds, found {value!r}.")
    return float(value)


def load_lab(folder: Path) -> Lab:
    """The lab in ``folder``, from its ``lab.toml``; :class:`LabFileError` says what is wrong."""
    folder = Path(folder).resolve()
    source = folder / LAB_FILE
    table = _Table(_read(source), "", source)
    take = table.take
    name = take("name", str, required=True)
    if not _NAME.fullmatch(name):
        raise LabFileError(f"{source}: name {name!r} should be lower-case letters, digits and dashes.")
    lab = Lab(
        name=name,
        title=take("title", str, required=True),
        default_root=Path(take("default_root", str, required=True)).expanduser(),
        rubric_version=str(take("rubric_version", (str, int), required=True)),
        folder=folder,
        environment=_environment(take("environment", dict, {}), folder, source),
        check_timeout=_positive(take("check_timeout", (int, float), DEFAULT_CHECK_TIMEOUT), "check_timeout", source),
        near_misses=_objects(take("near_misses", list, []), folder, source, "near_misses"),
        near_misses_hidden=take("near_misses_hidden", bool, False),
    )
    table.done()
    return lab
