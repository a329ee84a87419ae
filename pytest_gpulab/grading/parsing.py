"""Lenient readers for the learner's files: strict on meaning, lenient on form.

Every reader turns bad input (missing file, garbage bytes, broken TOML/YAML)
into :class:`StepFailed` with a sentence naming the file, so one step's bad
file never crashes the run.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from . import evidence
from .feedback import fail

MAX_FILE_BYTES = 1024 * 1024
MAX_YAML_VALUES = 200_000  # once aliases are expanded: a manifest, not a "billion laughs"
MAX_YAML_DOCUMENTS = 1000
MAX_YAML_DEPTH = 100


def read_text(path: Path, display: str | None = None) -> str:
    """The file's text (UTF-8, CRLF folded); a clear failure if it cannot be read."""
    __tracebackhide__ = True
    display = display or str(path)
    if not path.exists():
        if path.is_symlink():
            fail(f"{display} is a symbolic link that leads nowhere; make it a regular file.")
        fail(f"{display} does not exist; create it as the step asks.")
    if not path.is_file():
        fail(f"{display} is not a regular file.")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        fail(f"{display} could not be read ({error.strerror or error}).")
    if len(data) > MAX_FILE_BYTES:
        fail(f"{display} is larger than 1 MiB; it should be a small text file.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        fail(f"{display} is not UTF-8 text (bad byte at offset {error.start}); write it as plain text.")
    return text.replace("\r\n", "\n").replace("\r", "\n")


KEY_TUPLE = re.compile(r"\((\s*'[^']*'\s*(?:,\s*'[^']*'\s*)*),?\s*\)")


def toml_words(error: str) -> str:
    """tomllib's error with each key path it renders as a Python tuple written as the TOML table header it is:
    ``('plugins', 'io.containerd.grpc.v1.cri')`` becomes ``[plugins."io.containerd.grpc.v1.cri"]``."""

    def header(match: re.Match[str]) -> str:
        keys = re.findall(r"'([^']*)'", match.group(1))
        return "[" + ".".join(key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else f'"{key}"' for key in keys) + "]"

    return KEY_TUPLE.sub(header, error)


def load_toml(path: Path, display: str | None = None) -> dict[str, Any]:
    __tracebackhide__ = True
    display = display or str(path)
    text = read_text(path, display)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        fail(f"{display} is not valid TOML: {toml_words(str(error))}. Read it with tomllib to find the broken line.")
    except RecursionError:
        fail(f"{display} is nested too deeply to be a containerd configuration.")


YAML_HINT = "Look at the indentation, and at the colon and the space after each key, on that line and the one before."


def yaml_problem(error: yaml.YAMLError) -> str:
    """Where the YAML broke and what the parser missed, as a learner reads a line number: 'at line 4, column 3:
    could not find expected ':' (in a key that starts at line 3)'; the parser's own wording, without its stream names."""
    mark, problem = getattr(error, "problem_mark", None), getattr(error, "problem", None)
    if mark is None or not problem:
        return ": " + " ".join(str(error).replace('in "<unicode string>",', "").split())
    said = next((plain for start, plain in YAML_PROBLEMS.items() if problem.startswith(start)), problem)
    started = getattr(error, "context_mark", None)
    opened = f" (in the block that starts at line {started.line + 1})" if started is not None else ""
    return f"at line {mark.line + 1}, column {mark.column + 1}: {said}{opened}"


YAML_PROBLEMS = {  # the parser's words for the common slips, as a learner reads them
    "could not find expected ':'": "a key without its colon, or a colon without a space after it",
    "expected <block end>": "a line indented differently from the keys beside it",
    "mapping values are not allowed here": "a colon where a value was expected (quote a value holding ': ')",
    "found character '\\t'": "a tab (YAML indents with spaces only)",
}


def load_yaml_documents(path: Path, display: str | None = None) -> list[dict[str, Any]]:
    """Every object in the file: all ``---`` documents, ``kind: List`` items expanded."""
    __tracebackhide__ = True
    display = display or str(path)
    text = read_text(path, display)
    if _flow_depth(text) > MAX_YAML_DEPTH:
        fail(f"{display} is nested too deeply to be a Kubernetes manifest.")
    try:
        values = sum(_expanded_size(node, {}) for node in yaml.compose_all(text, Loader=yaml.SafeLoader))
        documents = list(yaml.safe_load_all(text)) if values <= MAX_YAML_VALUES else []
    except yaml.YAMLError as error:
        fail(f"{display} is not valid YAML {yaml_problem(error)}.", hint=YAML_HINT)
    except RecursionError:
        fail(f"{display} is nested too deeply to be a Kubernetes manifest.")
    if values > MAX_YAML_VALUES:
        fail(f"{display} expands to more than {MAX_YAML_VALUES} values (through YAML aliases); write its objects out.")
    if len(documents) > MAX_YAML_DOCUMENTS:
        fail(f"{display} holds {len(documents)} documents; the step asks for a few objects.")
    objects: list[dict[str, Any]] = []
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict):
            fail(f"{display} should hold Kubernetes objects (mappings), found a {type(document).__name__}.")
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            objects.extend(item for item in document["items"] if isinstance(item, dict))
        else:
            objects.append(document)
    return objects


def yaml_in(value: str, where: str) -> Any:
    """The YAML document a string holds (a ConfigMap's ``data.any``), bounded as a file's YAML is.

    Example:: sharing = yaml_in(dig(config_map, "data", "any"), "data.any")
    """
    __tracebackhide__ = True
    if _flow_depth(value) > MAX_YAML_DEPTH:
        fail(f"{where} is nested too deeply.")
    try:
        size = _expanded_size(yaml.compose(value, Loader=yaml.SafeLoader), {})
        document = yaml.safe_load(value) if size <= MAX_YAML_VALUES else None
    except yaml.YAMLError as error:
        fail(f"{where} is not valid YAML inside {yaml_problem(error)}.", hint=YAML_HINT)
    except RecursionError:
        fail(f"{where} is nested too deeply.")
    if size > MAX_YAML_VALUES:
        fail(f"{where} expands to more than {MAX_YAML_VALUES} values (through YAML aliases); write them out.")
    return document


def _flow_depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest outside quotes: a cheap look before the parser recurses."""
    depth = deepest = 0
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _expanded_size(node: yaml.Node | None, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for once its aliases are expanded; each node is sized once."""
    if node is None:
        return 0
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a node inside itself counts once
        if isinstance(node, yaml.SequenceNode):
            sizes[id(node)] = 1 + sum(_expanded_size(item, sizes) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            sizes[id(node)] = 1 + sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    return sizes[id(node)]


def find_object(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any] | None:
    """The first object of ``kind`` (and ``name`` if given); kind compared case-insensitively."""
    for obj in objects:
        if str(obj.get("kind", "")).lower() != kind.lower():
            continue
        metadata = obj.get("metadata")
        if name is None or (isinstance(metadata, dict) and metadata.get("name") == name):
            return obj
    return None


def dig(data: Any, *keys: Any, default: Any = None) -> Any:
    """``data[k1][k2]...`` or ``default`` when any level is missing or of the wrong type.

    Example:: dig(pod, "spec", "containers", 0, "image")  # None when any level is missing
    """
    start = data
    for key in keys:
        if (isinstance(data, dict) and key in data) or (
            isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data)
        ):
            data = data[key]
        else:
            evidence.note_dig(start, keys, default)
            return default
    evidence.note_dig(start, keys, data)
    return data


def first_lines(text: str, count: int) -> list[str]:
    """The first ``count`` lines that are neither blank nor ``#`` comments, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")][:count]


def without_comments(text: str) -> str:
    """Shell (or Python) text with comments removed: a ``#`` that starts a word starts a comment."""
    return "\n".join(re.sub(r"(^|\s)#.*$", r"\1", line) for line in text.splitlines())


def _paths_of(data: Any, key: str, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if not isinstance(data, dict):
        return []
    found = [(*path, key)] if key in data else []
    for name, value in data.items():
        found += _paths_of(value, key, (*path, str(name)))
    return found


def misplaced(document: Any, *path: str, toml: bool = False) -> str | None:
    """A diagnosis for a key missing at ``path`` but written elsewhere in the document: where it is and where it
    belongs, as the learner writes it (dotted keys, or TOML table headers). None when it is nowhere else.

    Example:: hint=misplaced(sharing, "sharing", "timeSlicing", "failRequestsGreaterThanOne")
    """
    if dig(document, *path) is not None:
        return None
    elsewhere = [found for found in _paths_of(document, path[-1]) if found != tuple(path)]
    if not elsewhere:
        return None

    def shown(keys: tuple[str, ...]) -> str:
        if not toml:
            return ".".join(keys)
        table = ".".join(f'"{k}"' if "." in k else k for k in keys[:-1])
        return f"[{table}]" if table else "the top level"

    where = "in" if toml else "at"
    return (
        f"{path[-1]} is written {where} {shown(elsewhere[0])}, where it is not read: it belongs {where} "
        f"{shown(tuple(path))}."
    )
