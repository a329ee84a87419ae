"""Variants of a lab's reference solution: each edits a copy of the reference root (the live cluster
stays the reference's). A trap names the step it must fail and the words its message must (not) hold;
a form must pass every step."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def edit(root: Path, relative: str, change: Callable[[str], str]) -> None:
    path = root / relative
    text = path.read_text()
    changed = change(text)
    assert changed != text, f"variant did not change {relative}"
    path.write_text(changed)


def replace(relative: str, old: str, new: str, count: int = -1) -> Callable[[Path], object]:
    return lambda root: edit(root, relative, lambda text: text.replace(old, new, count))


def sub(relative: str, pattern: str, new: str) -> Callable[[Path], object]:
    return lambda root: edit(root, relative, lambda text: re.sub(pattern, new, text, flags=re.M))


def write(relative: str, text: str, mode: int | None = None) -> Callable[[Path], object]:
    def apply(root: Path) -> None:
        path = root / relative
        path.write_text(text)
        if mode is not None:
            path.chmod(mode)

    return apply


def chmod(relative: str, mode: int) -> Callable[[Path], object]:
    return lambda root: (root / relative).chmod(mode)


def remove(relative: str) -> Callable[[Path], object]:
    return lambda root: (root / relative).unlink()


def combine(*changes: Callable[[Path], object]) -> Callable[[Path], object]:
    def apply(root: Path) -> None:
        for change in changes:
            change(root)

    return apply


@dataclass(frozen=True)
class Variant:
    name: str
    change: Callable[[Path], object]
    failing_step: int | None = None  # None: every step must pass
    says: tuple[str, ...] = ()  # fragments the failure message (or a note) must contain
    note: str | None = None  # fragment of a feedback note the passing step must carry
    says_not: tuple[str, ...] = ()  # fragments the failure message must not contain (a cause the work does not have)
    grader_args: tuple[str, ...] = field(default=())


def copy_root(source: Path, target: Path) -> Path:
    """A copy keeping file modes (the exec bit matters to step 4)."""
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(path.read_bytes())
            os.chmod(destination, path.stat().st_mode & 0o777)
    return target
