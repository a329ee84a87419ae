"""A lab's variants, ``variants.toml`` beside ``lab.toml``: right answers in other forms, and mistakes.

A ``[[form]]`` must pass every step; a ``[[trap]]`` must fail exactly its ``step``
with the words it ``says``. Each starts from the reference solution's lab root and
changes it by ``[[…edit]]`` tables (data: replace, sub, write, append, prepend,
chmod, remove, mkdir on a file of the lab root) and/or a ``shell`` snippet run
after them with ``ROOT`` and ``KUBECONFIG`` set, for cluster changes. docs/authors.md,
"Authors: prove a lab" documents the format; ``gpulab selftest`` proves it
(:mod:`pytest_gpulab.selftest.prove`). Reading checks every key, so a typo is an error
naming the file, the variant and the key. Usable without pytest.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

VARIANTS_FILE = "variants.toml"
FORM, TRAP = "form", "trap"

# Each edit names its action by the key that holds the file's path; the other keys it takes, required first.
ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "replace": (("old", "new"), ("count",)),
    "sub": (("pattern", "new"), ()),
    "write": ((), ("text", "hex", "mode")),
    "append": (("text",), ()),
    "prepend": (("text",), ()),
    "chmod": (("mode",), ()),
    "remove": ((), ()),
    "mkdir": ((), ()),
}
COMMON_KEYS = {"name", "edit", "shell", "solve_steps", "grader_args", "requires"}
KIND_KEYS = {FORM: {"note"}, TRAP: {"step", "says", "says_not", "blocks", "blocked_says"}}


class VariantsError(ValueError):
    """A variants.toml that cannot be used; the message names the file, the variant and the key."""


class EditFailed(RuntimeError):
    """An edit that could not be made on this lab root (a file missing, or an edit that changes nothing)."""


@dataclass(frozen=True)
class Edit:
    """One change to one file of the lab root."""

    action: str
    path: str
    old: str = ""
    new: str = ""
    count: int = -1
    pattern: str = ""
    text: str | None = None
    data: bytes | None = None
    mode: int | None = None

    def apply(self, root: Path) -> None:
        target = root / self.path
        try:
            getattr(self, f"_{self.action}")(target)
        except OSError as error:
            raise EditFailed(f"{self.action} {self.path}: {error.strerror or error}") from None

    def _changed(self, target: Path, text: str) -> None:
        if text == target.read_text():
            raise EditFailed(f"{self.action} {self.path} changed nothing: the reference's file is not as it expects")
        target.write_text(text)

    def _replace(self, target: Path) -> None:
        self._changed(target, target.read_text().replace(self.old, self.new, self.count))

    def _sub(self, target: Path) -> None:
        self._changed(target, re.sub(self.pattern, self.new, target.read_text(), flags=re.M))

    def _append(self, target: Path) -> None:
        self._changed(target, target.read_text() + (self.text or ""))

    def _prepend(self, target: Path) -> None:
        self._changed(target, (self.text or "") + target.read_text())

    def _write(self, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.data if self.data is not None else (self.text or "").encode())
        if self.mode is not None:
            target.chmod(self.mode)

    def _chmod(self, target: Path) -> None:
        target.chmod(self.mode or 0)

    def _remove(self, target: Path) -> None:
        target.unlink()

    def _mkdir(self, target: Path) -> None:
        target.mkdir(parents=True)


@dataclass(frozen=True)
class Variant:
    """A form (``step`` None: every step must pass) or a trap (``step``: the one it must fail)."""

    kind: str
    name: str
    edits: tuple[Edit, ...] = ()
    shell: str | None = None  # run after the edits, with ROOT, KUBECONFIG, LAB_DIR and SOLVE set
    solve_steps: tuple[int, ...] | None = None  # the reference's steps run first; None: all
    grader_args: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # programs that must be on PATH, else the variant is skipped
    note: str | None = None  # a form: a fragment of a feedback note some check must carry
    step: int | None = None
    says: tuple[str, ...] = ()
    says_not: tuple[str, ...] = ()
    blocks: tuple[int, ...] = ()  # steps that need the trap's step and must be blocked by it
    blocked_says: tuple[str, ...] = field(default=())

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def own_cluster(self) -> bool:
        """Whether it changes the cluster (a shell snippet, or only some of the reference's steps)."""
        return self.shell is not None or self.solve_steps is not None

    def apply_edits(self, root: Path) -> None:
        for edit in self.edits:
            edit.apply(root)


def load_variants(folder: Path) -> list[Variant]:
    """The variants declared in ``folder/variants.toml``, forms first, each kind in the file's order."""
    path = Path(folder) / VARIANTS_FILE
    if not path.is_file():
        return []
    try:
        document = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise VariantsError(f"{path}: not valid TOML: {error}") from None
    if unknown := set(document) - {FORM, TRAP}:
        raise VariantsError(f"{path}: unknown table {sorted(unknown)[0]!r} (only [[form]] and [[trap]])")
    variants = [_variant(path, kind, table) for kind in (FORM, TRAP) for table in _tables(path, document, kind)]
    names = [variant.name for variant in variants]
    if duplicates := sorted({name for name in names if names.count(name) > 1}):
        raise VariantsError(f"{path}: two variants named {duplicates[0]!r}")
    return variants


def _tables(path: Path, document: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    tables = document.get(kind, [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise VariantsError(f"{path}: {kind} should be an array of tables, [[{kind}]]")
    return tables


class _Reader:
    """Typed reads of one table, each error naming where it is."""

    def __init__(self, where: str, table: dict[str, Any], allowed: set[str]) -> None:
        self.where, self.table = where, table
        if unknown := sorted(set(table) - allowed):
            known = f"it takes: {', '.join(sorted(allowed))}"
            if unknown[0] in COMMON_KEYS | KIND_KEYS[FORM] | KIND_KEYS[TRAP]:
                known += "; a variant's own keys go before its first [[…edit]], which takes the keys after it"
            raise VariantsError(f"{where}: unknown key {unknown[0]!r} ({known})")

    def get(self, key: str, kind: type, default: Any = None, *, required: bool = False) -> Any:
        if key not in self.table:
            if required:
                raise VariantsError(f"{self.where}: {key} is required")
            return default
        value = self.table[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise VariantsError(f"{self.where}: {key} should be {_TYPE_NAMES[kind]}, found {value!r}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        return self._items(key, str, "a list of strings")

    def numbers(self, key: str) -> tuple[int, ...]:
        return self._items(key, int, "a list of step numbers")

    def _items(self, key: str, kind: type, what: str) -> tuple[Any, ...]:
        values = self.get(key, list, [])
        if not all(isinstance(value, kind) and not isinstance(value, bool) for value in values):
            raise VariantsError(f"{self.where}: {key} should be {what}, found {values!r}")
        return tuple(values)


_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list"}


def _variant(path: Path, kind: str, table: dict[str, Any]) -> Variant:
    name = table.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][-A-Za-z0-9_.]*", name):
        raise VariantsError(f"{path}: a [[{kind}]] needs a name of letters, digits, dashes and dots, found {name!r}")
    where = f"{path}: {kind} {name!r}"
    read = _Reader(where, table, COMMON_KEYS | KIND_KEYS[kind])
    edits = tuple(_edit(f"{where}, edit {index}", entry) for index, entry in enumerate(read.get("edit", list, []), 1))
    solve_steps = read.numbers("solve_steps") if "solve_steps" in table else None
    variant = Variant(
        kind, name, edits, read.get("shell", str), solve_steps, read.strings("grader_args"), read.strings("requires")
    )
    if not (edits or variant.own_cluster):
        raise VariantsError(f"{where}: it changes nothing (no edit, shell or solve_steps)")
    if kind == FORM:
        return _with(variant, note=read.get("note", str))
    trap = _with(
        variant,
        step=read.get("step", int, required=True),
        says=read.strings("says"),
        says_not=read.strings("says_not"),
        blocks=read.numbers("blocks"),
        blocked_says=read.strings("blocked_says"),
    )
    if trap.step in trap.blocks:
        raise VariantsError(f"{where}: blocks lists its own step {trap.step}")
    return trap


def _with(variant: Variant, **changes: Any) -> Variant:
    return Variant(**{**variant.__dict__, **changes})


def _edit(where: str, entry: Any) -> Edit:
    if not isinstance(entry, dict):
        raise VariantsError(f"{where}: should be a table, [[…edit]]")
    actions = [key for key in entry if key in ACTIONS]
    if len(actions) != 1:
        raise VariantsError(
            f"{where}: should name one action of {', '.join(ACTIONS)} (the file's path), found {actions}"
        )
    action = actions[0]
    required, optional = ACTIONS[action]
    read = _Reader(f"{where} ({action})", entry, {action, *required, *optional})
    relative = read.get(action, str)
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or ".." in parts:
        raise VariantsError(f"{where}: {relative!r} should be a path inside the lab root")
    values = {key: read.get(key, str if key != "mode" else int, required=True) for key in required}
    values.update({key: read.get(key, int if key in ("count", "mode") else str) for key in optional if key in entry})
    if action == "write":
        values.update(_contents(where, values.pop("text", None), values.pop("hex", None)))
    if action == "sub":
        _compiles(where, values["pattern"])
    return Edit(action, relative, **{key: value for key, value in values.items() if value is not None})


def _contents(where: str, text: str | None, hex_bytes: str | None) -> dict[str, Any]:
    if (text is None) == (hex_bytes is None):
        raise VariantsError(f"{where}: a write takes text or hex (the bytes), one of the two")
    if hex_bytes is None:
        return {"text": text}
    try:
        return {"data": bytes.fromhex(hex_bytes)}
    except ValueError:
        raise VariantsError(f"{where}: hex should be pairs of hex digits, found {hex_bytes!r}") from None


def _compiles(where: str, pattern: str) -> None:
    try:
        re.compile(pattern, re.M)
    except re.error as error:
        raise VariantsError(f"{where}: the pattern does not compile: {error}") from None


def copy_root(source: Path, target: Path) -> Path:
    """A copy of a lab root keeping file modes (an exec bit matters to a grader) and empty folders."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(path.read_bytes())
            os.chmod(destination, path.stat().st_mode & 0o777)
    return target
