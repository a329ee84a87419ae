"""A lab's near-miss objects as its author wrote them: each object with the comment above it, which names the
steps whose checkers it serves ("Step 4: ...", "Steps 6 and 7: ..."), for ``gpulab labs LAB``. Usable without
pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .labfile import Lab

STEPS = re.compile(r"^Steps? ([\d, and]+):\s*(.*)", re.S)


@dataclass(frozen=True)
class NearMiss:
    """One near-miss object: its kind and name, the steps its comment names, and that comment's first sentence."""

    kind: str
    name: str
    steps: tuple[int, ...]
    note: str
    obj: dict[str, Any]


def near_misses_in(paths: Iterable[Path]) -> list[NearMiss]:
    """Each object of these YAML files, in order, with the steps and note of the comment above it (none: ``()``)."""
    found = []
    for path in paths:
        for document in re.split(r"^---\s*$", path.read_text(encoding="utf-8"), flags=re.M):
            obj = yaml.safe_load(document)
            if not isinstance(obj, dict):
                continue
            comment = " ".join(
                line.lstrip("#").strip() for line in document.strip().splitlines() if line.startswith("#")
            )
            match = STEPS.match(comment)
            steps = tuple(int(n) for n in re.findall(r"\d+", match.group(1))) if match else ()
            note = (match.group(2) if match else comment).split(": ", 1)[0].split(". ")[0].rstrip(".")
            found.append(NearMiss(str(obj.get("kind")), str((obj.get("metadata") or {}).get("name")), steps, note, obj))
    return found


def hidden_names(lab: Lab) -> frozenset[str]:
    """The names of a lab's near-miss objects where its ``lab.toml`` hides them (``near_misses_hidden``), else none."""
    if not lab.near_misses_hidden:
        return frozenset()
    try:
        return frozenset(miss.name for miss in near_misses_in(lab.near_misses) if miss.name not in ("", "None"))
    except (OSError, yaml.YAMLError):
        return frozenset()


def identities(lab: Lab) -> list[dict[str, Any]]:
    """The near-miss objects as kind, namespace and name (what a check's evidence shows of a copy's additions)."""
    try:
        found = near_misses_in(lab.near_misses)
    except (OSError, yaml.YAMLError):
        return []
    return [
        {"kind": miss.kind, "namespace": (miss.obj.get("metadata") or {}).get("namespace"), "name": miss.name}
        for miss in found
    ]
