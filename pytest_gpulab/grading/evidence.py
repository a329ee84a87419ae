"""What a check read, as the evidence behind its verdict: the learner's files with their first lines, the cluster
objects by kind, namespace, name and resourceVersion with the fields it looked at, and each script run.

The kits record it, never a step module: the plugin sets :data:`EVIDENCE` to a fresh :class:`Evidence` around
each check, and the kits' readers (``learner.file(...)``, :class:`~.live.LiveCluster`, :func:`~.parsing.dig`,
the scripts kit's runs) add to whatever is set; with nothing set (a kit used without pytest) nothing is kept.
Everything kept is bounded: a few lines of a file, a few fields of an object, the head of a script's output, a
cap on the entries of one check, and every cut is marked. Names a lab hides (``Evidence.hidden``) are never
shown. Entries are plain JSON, so a report's reader can tell which files and kinds a step read. Usable without
pytest.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .quoting import file_head, head

VALUE_CHARS = 160  # characters of one field's value, as JSON
FIELDS = 16  # fields kept per object
LIST_ITEMS = 20  # objects of one list kept (and followed by dig)
ENTRIES = 40  # entries of one check
CHECK_CHARS = 24_000  # characters of one check's evidence, as JSON
OUTPUT_CHARS = 600  # characters of a script's stdout or stderr
WALK = 3000  # containers of one object followed by dig
HIDDEN = "(hidden)"


def _value(value: Any) -> Any:
    """A field's value, as JSON of bounded size."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = str(value)
    return head(text, VALUE_CHARS)[0]


def identity(
    kind: str, obj: Mapping[str, Any] | None, namespace: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """An object as kind, namespace, name and resourceVersion (None for one that was not there)."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return {
        "kind": str((obj or {}).get("kind") or kind) if isinstance(obj, Mapping) else kind,
        "namespace": metadata.get("namespace", namespace),
        "name": metadata.get("name", name),
        "resourceVersion": metadata.get("resourceVersion"),
    }


@dataclass
class Ledger:
    """The objects a run has read, by the identity of each dict and list in them: so that a check that digs into
    an object a module's fixture read for an earlier check still records it. Held for one grading run."""

    places: dict[int, tuple[dict[str, Any], tuple[Any, ...]]] = field(default_factory=dict)
    held: list[Any] = field(default_factory=list)  # keeps every indexed container alive, so no id is reused
    copies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # a copy's port: the objects added to it

    def index(self, who: dict[str, Any], obj: Any) -> None:
        stack: list[tuple[Any, tuple[Any, ...]]] = [(obj, ())]
        seen = 0
        while stack and seen < WALK:
            node, path = stack.pop()
            if id(node) in self.places:
                continue
            seen += 1
            self.places[id(node)] = (who, path)
            self.held.append(node)
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack += [(child, (*path, key)) for key, child in items if isinstance(child, (dict, list))]


@dataclass
class Evidence:
    """One check's evidence: its entries, in the order first read, each once."""

    ledger: Ledger = field(default_factory=Ledger)
    hidden: frozenset[str] = frozenset()
    entries: list[dict[str, Any]] = field(default_factory=list)
    left_out: int = 0
    _keys: dict[Hashable, dict[str, Any]] = field(default_factory=dict)
    _changes: int = 0  # counted, so that an unchanged check's JSON is made once (a report is written after each)
    _shown: tuple[int, list[dict[str, Any]]] = (-1, [])

    def add(self, key: Hashable, entry: dict[str, Any]) -> dict[str, Any] | None:
        """The entry under ``key``: the one kept already, else ``entry`` (None once the check has too many)."""
        self._changes += 1
        if key in self._keys:
            return self._keys[key]
        if len(self.entries) >= ENTRIES:
            self.left_out += 1
            return None
        self._keys[key] = entry
        self.entries.append(entry)
        return entry

    def take(self, other: Evidence) -> None:
        """Another record's entries (a fixture's), as this one's too."""
        for key, entry in other._keys.items():
            taken = {name: dict(value) if name == "fields" else value for name, value in entry.items()}
            self.add(key, taken)

    def object(self, who: dict[str, Any]) -> dict[str, Any] | None:
        """The entry of an object (its identity) or of a learner's file (its entry as first read)."""
        if "file" in who:
            return self.add(("file", who["file"]), {key: value for key, value in who.items() if key != "fields"})
        key = ("object", who["kind"], who["namespace"], who["name"], who["resourceVersion"])
        return self.add(key, {"object": who})

    def field_read(self, who: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
        entry = self.object(who)
        if entry is None:
            return
        self._changes += 1
        fields = entry.setdefault("fields", {})
        name = head(".".join(map(str, path)), VALUE_CHARS)[0] or "(whole object)"
        if name in fields or len(fields) < FIELDS:
            fields[name] = _value(value)
        else:
            entry["fields_cut"] = True

    def as_json(self) -> list[dict[str, Any]]:
        """The entries, hidden names shown as such, bounded to :data:`CHECK_CHARS`; what was left out marked."""
        if self._shown[0] != self._changes:
            self._shown = (self._changes, self._bounded())
        return self._shown[1]

    def _bounded(self) -> list[dict[str, Any]]:
        hiding = _hiding(self.hidden)
        entries = [_conceal(entry, hiding) for entry in self.entries]
        left, size = self.left_out, 2
        kept: list[dict[str, Any]] = []
        for entry in entries:
            size += len(json.dumps(entry, default=str)) + 2
            if size > CHECK_CHARS:
                left += len(entries) - len(kept)
                break
            kept.append(entry)
        return kept + ([{"cut": f"{left} more entries left out"}] if left else [])


@functools.lru_cache(maxsize=8)
def _hiding(hidden: frozenset[str]) -> re.Pattern[str] | None:
    """Each hidden name where it stands as a whole name (not inside a longer one)."""
    if not hidden:
        return None
    names = "|".join(re.escape(name) for name in sorted(hidden, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])(?:{names})(?![\w.-])")


def _conceal(value: Any, hiding: re.Pattern[str] | None) -> Any:
    """``value`` (JSON data) with every hidden name shown as :data:`HIDDEN`."""
    if hiding is None:
        return value
    if isinstance(value, str):
        return hiding.sub(HIDDEN, value)
    if isinstance(value, dict):
        return {_conceal(key, hiding): _conceal(item, hiding) for key, item in value.items()}
    if isinstance(value, list):
        return [_conceal(item, hiding) for item in value]
    return value


EVIDENCE: ContextVar[Evidence | None] = ContextVar("gpulab_evidence", default=None)


@contextmanager
def recording(evidence: Evidence) -> Iterator[Evidence]:
    """Record what the kits read into ``evidence`` while inside."""
    token = EVIDENCE.set(evidence)
    try:
        yield evidence
    finally:
        EVIDENCE.reset(token)


def note_file(relative: str, path: Path) -> None:
    """A learner's file read: its first lines (only the head of it is read), or that it is not there."""
    evidence = EVIDENCE.get()
    if evidence is not None and ("file", relative) not in evidence._keys:
        evidence.add(("file", relative), {"file": relative, **file_head(path)})


def note_document(relative: str, document: Any) -> Any:
    """A learner's file as parsed (TOML, YAML objects, key-values): a field later read from it with
    :func:`~.parsing.dig` is recorded on the file's entry, in this check or a later one. Returns ``document``."""
    evidence = EVIDENCE.get()
    if evidence is not None and isinstance(document, (dict, list)):
        entry = evidence._keys.get(("file", relative)) or {"file": relative}
        evidence.ledger.index({key: value for key, value in entry.items() if key != "fields"}, document)
    return document


def note_given(values: Iterable[Any]) -> None:
    """What a check was handed by its fixtures that the run read before (a file's TOML, an object, a list of
    them): recorded as read by this check too."""
    evidence = EVIDENCE.get()
    if evidence is None:
        return
    for value in values:
        inner = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple, set)) else ()
        for candidate in [value, *list(inner)[:LIST_ITEMS]]:
            place = evidence.ledger.places.get(id(candidate))
            if place is not None:
                evidence.object(place[0])


def note_object(kind: str, obj: Any, namespace: str | None = None, name: str | None = None) -> None:
    """A cluster object read (or looked for and not found)."""
    evidence = EVIDENCE.get()
    if evidence is None:
        return
    who = identity(kind, obj if isinstance(obj, Mapping) else None, namespace, name)
    if isinstance(obj, Mapping):
        evidence.ledger.index(who, obj)
    else:
        who["found"] = False
    evidence.object(who)


def note_list(kind: str, namespace: str | None, query: Mapping[str, str], items: list[dict[str, Any]]) -> None:
    """A list read: what was asked, how many came back, and the first of them as objects."""
    evidence = EVIDENCE.get()
    if evidence is None:
        return
    asked = {"kind": kind, "namespace": namespace, **{key: value for key, value in query.items() if key != "limit"}}
    key = ("list", *sorted((k, str(v)) for k, v in asked.items()))
    entry = evidence.add(key, {"list": asked, "count": len(items)})
    if entry is not None:
        entry["count"] = len(items)
    for item in items[:LIST_ITEMS]:
        note_object(kind, item, namespace)


def note_dig(data: Any, keys: tuple[Any, ...], value: Any) -> None:
    """A field read with :func:`~.parsing.dig` from an object the run has read."""
    evidence = EVIDENCE.get()
    if evidence is None or not keys:
        return
    place = evidence.ledger.places.get(id(data))
    if place is not None:
        evidence.field_read(place[0], (*place[1], *keys), value)


def note_copy(host: str, added: list[dict[str, Any]]) -> None:
    """A copy of the cluster at ``host`` (its API server's address), with ``added`` (the near-miss objects, as
    :func:`identity` gives them): a script run on a view of it is shown to have been given them."""
    evidence = EVIDENCE.get()
    if evidence is not None:
        evidence.ledger.copies[str(urlsplit(host).port)] = added


def copy_at(port: str) -> list[dict[str, Any]] | None:
    """The objects added to the copy whose API server listens on ``port``, if it is one."""
    evidence = EVIDENCE.get()
    return None if evidence is None else evidence.ledger.copies.get(port)
