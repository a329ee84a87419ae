"""What each step reads (files under the lab root, kinds of cluster object), and so which steps a change touches.

The steps a change touches are graded first; every step is graded after every change all the same, so what
this module says orders a grading and never decides a verdict. A step's reads come from its entry in the
grading report (:func:`reads_of`: the evidence its checks record, with what its module names), else from its
module's text (:func:`static_reads`: the string constants that name a path or a kind), else they are unknown,
and every change touches the step. A step that ran a learner script on the cluster reads any kind. Usable without pytest.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..labs.discovery import Lab
from ..labs.kinds import known
from ..reports.evidence import ANY_KIND, step_reads
from .changes import FILE, OBJECT, Change

PATH = re.compile(r"^[\w.*?{}\[\]-]+(/[\w.*?{}\[\]-]+)+/?$|^[\w-]+\.(txt|sh|ya?ml|toml|json|py|conf)$")
STEP_MODULE = re.compile(r"^step(\d+)_\w*\.py$")
KIND_LINE = re.compile(r"^\s*-?\s*kind:\s*([A-Z]\w*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Reads:
    files: frozenset[str]  # paths (or globs) relative to the lab root
    kinds: frozenset[str]  # kinds of cluster object, as the graders name them


def reads_of(step_entry: Mapping[str, Any], static: Reads | None = None) -> Reads | None:
    """A step's reads from its report entry: the files and kinds its checks' evidence records, with ``static`` (what
    its module names: a step that failed early read less than it will once it goes further). None, unknown, for a
    step whose checks recorded nothing."""
    if not any(check.get("evidence") for check in step_entry.get("checks") or []):
        return static
    files, kinds = step_reads(step_entry)
    if static is not None:
        files, kinds = files | static.files, kinds | static.kinds
    return Reads(frozenset(files), frozenset(kinds))


def _constants(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def custom_kinds(lab: Lab) -> set[str]:
    """Kinds the lab's own manifests name (its near misses, its reference) that the package does not know."""
    found: set[str] = set()
    for path in lab.folder.rglob("*"):
        if path.suffix in (".yaml", ".yml", ".sh") and path.is_file():
            found.update(KIND_LINE.findall(path.read_text(errors="replace")))
    return {kind for kind in found if known(kind) is None}


def _module_reads(path: Path, custom: set[str]) -> Reads | None:
    try:
        constants = set(_constants(ast.parse(path.read_text())))
    except (OSError, SyntaxError, ValueError):
        return None
    files = {text.rstrip("/") for text in constants if PATH.match(text)}
    kinds = {text for text in constants if text in custom or getattr(known(text), "kind", None) == text}
    return Reads(frozenset(files), frozenset(kinds)) if files or kinds else None


def static_reads(lab: Lab) -> dict[int, Reads | None]:
    """Each step module's reads, read from its text: a guess that orders the gradings, never a verdict."""
    custom = custom_kinds(lab)
    found: dict[int, Reads | None] = {}
    for path in sorted(lab.folder.glob("step*.py")):
        if match := STEP_MODULE.match(path.name):
            found[int(match.group(1))] = _module_reads(path, custom)
    return found


def lab_kinds(reads: Mapping[int, Reads | None]) -> set[str]:
    """The kinds to watch in the lab's cluster: every kind a step reads."""
    return {kind for step in reads.values() if step is not None for kind in step.kinds if kind != ANY_KIND}


def _file_touches(path: str, read: str) -> bool:
    return (
        path == read
        or path.startswith(read + "/")
        or read.startswith(path + "/")
        or fnmatch.fnmatchcase(path, read)
        or fnmatch.fnmatchcase(path, read + "/*")
    )


def touches(change: Change, reads: Reads | None) -> bool:
    """Whether ``change`` may change what a step with ``reads`` reads (unknown reads: always)."""
    if reads is None:
        return True
    if change.what == FILE:
        return any(_file_touches(change.name, read) for read in reads.files)
    if change.what == OBJECT:
        resource = known(change.kind or "")
        return ANY_KIND in reads.kinds or any(
            kind == change.kind or (resource is not None and resource.answers_to(kind)) for kind in reads.kinds
        )
    return True


def touched(changes: Iterable[Change], reads: Mapping[int, Reads | None]) -> set[int]:
    """The steps any of ``changes`` touches."""
    changes = list(changes)
    return {step for step, step_reads in reads.items() if any(touches(change, step_reads) for change in changes)}
