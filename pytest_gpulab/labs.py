"""The labs this project knows: where a learner works and what cluster they start with."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


@dataclass(frozen=True)
class NodeSpec:
    """A fake node of the lab's starting cluster, managed by the kwok controller."""

    name: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    labels: dict[str, str] = field(default_factory=dict)

    def manifest(self) -> dict:
        resources_ = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **self.labels,
                },
            },
            "spec": {},
            "status": {"capacity": resources_, "allocatable": resources_},
        }


@dataclass(frozen=True)
class Lab:
    name: str
    title: str
    default_root: Path
    nodes: tuple[NodeSpec, ...]

    @property
    def graders(self) -> Traversable:
        return resources.files("pytest_gpulab.graders") / self.name

    @property
    def has_graders(self) -> bool:
        return self.graders.is_dir()


_THREE_WORKERS = tuple(NodeSpec(f"lab-node-{index}") for index in range(3))

LABS: dict[str, Lab] = {
    lab.name: lab
    for lab in (
        Lab("gpuop", "Reproducing the GPU incident: from config merge to stalled rollout", Path("/root/gpuop"), _THREE_WORKERS),
        Lab("gpurt", "RuntimeClass handlers and what validates them", Path("/root/gpurt"), _THREE_WORKERS),
    )
}


def gradable_labs() -> list[str]:
    return sorted(name for name, lab in LABS.items() if lab.has_graders)


class UnknownLab(LookupError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown lab {name!r}; the labs with graders are: {', '.join(gradable_labs())}")


def get_lab(name: str, *, gradable: bool = False) -> Lab:
    lab = LABS.get(name)
    if lab is None or (gradable and not lab.has_graders):
        raise UnknownLab(name)
    return lab
