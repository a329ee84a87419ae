"""What ``gpulab selftest`` reads around a grading (the grading report, and the reference's state before and
after it: grading must change neither a learner file nor a cluster object), and how it runs a command, bounded."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster.kwok import KwokCluster

# Written by the cluster's own components while anything runs: their versions move by themselves.
SELF_UPDATING = {"leases.coordination.k8s.io", "events", "events.events.k8s.io"}
TAIL = 3000
SOLVE_TIMEOUT = 600.0


class RowError(RuntimeError):
    """A row that could not be graded: the reference, a shell snippet or pytest failed; says how."""


def tail(text: str, size: int = TAIL) -> str:
    return text if len(text) <= size else "…" + text[-size:]


def seed_of(args: Sequence[str]) -> tuple[int | None, list[str]]:
    """The ``--lab-seed`` a variant's grader arguments give (``--lab-seed=N`` or ``--lab-seed N``), and the rest."""
    seed, rest, taking = None, [], False
    for arg in args:
        if taking:
            seed, taking = int(arg), False
        elif arg == "--lab-seed":
            taking = True
        elif arg.startswith("--lab-seed="):
            seed = int(arg.partition("=")[2])
        else:
            rest.append(arg)
    return seed, rest


def bounded(
    what: str, command: list[str], timeout: float = SOLVE_TIMEOUT, **options: Any
) -> subprocess.CompletedProcess:
    """``command`` run to its end, or a row error once ``timeout`` seconds have passed."""
    try:
        return subprocess.run(command, stdin=subprocess.DEVNULL, timeout=timeout, **options)
    except subprocess.TimeoutExpired:
        raise RowError(f"{what} did not finish within {timeout:.0f}s") from None


def read_report(report: Path, returncode: int, output: Path) -> dict[str, Any]:
    """The grading report of a run that graded (exit 0 or 1) to the end."""
    try:
        document = json.loads(report.read_text())
    except (OSError, ValueError):
        document = {}
    if returncode not in (0, 1) or not document.get("complete"):
        printed = output.read_text(errors="replace") if output.exists() else ""
        raise RowError(f"pytest ended with exit status {returncode} before the grading was complete:\n{tail(printed)}")
    return document


def resource_versions(cluster: KwokCluster) -> dict[tuple[str, str, str], str]:
    """Every object of every listable resource, by (kind, namespace, name), with its resourceVersion."""
    names = cluster.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    listed = cluster.get_json(",".join(name for name in names if name not in SELF_UPDATING), "-A")
    return {
        (item["kind"], item["metadata"].get("namespace", ""), item["metadata"]["name"]): item["metadata"][
            "resourceVersion"
        ]
        for item in listed["items"]
        if "resourceVersion" in item["metadata"]  # computed on read (ComponentStatus): nothing stored to change
    }


def learner_files(root: Path) -> dict[str, tuple[str, int, int]]:
    """Each file and folder of the lab root: its sha256 (files), mode and modification time."""
    return {
        str(path.relative_to(root)): (
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "",
            path.stat().st_mode,
            path.stat().st_mtime_ns,
        )
        for path in sorted(root.rglob("*"))
    }


@dataclass(frozen=True)
class ReferenceState:
    files: dict[str, tuple[str, int, int]]
    objects: dict[tuple[str, str, str], str]

    @classmethod
    def of(cls, root: Path, cluster: KwokCluster) -> ReferenceState:
        return cls(learner_files(root), resource_versions(cluster))

    def changes(self, after: ReferenceState) -> list[str]:
        """What grading changed: each learner file, and each cluster object, named."""
        files = sorted(
            key for key in self.files.keys() | after.files.keys() if self.files.get(key) != after.files.get(key)
        )
        objects = sorted(
            "/".join(part for part in key if part)
            for key in self.objects.keys() | after.objects.keys()
            if self.objects.get(key) != after.objects.get(key)
        )
        return [f"grading changed the learner's {path}" for path in files] + [
            f"grading changed the cluster object {name}" for name in objects
        ]
