"""Lenient readers for the learner's files: strict on meaning, lenient on form.

Every reader turns bad input (missing file, garbage bytes, broken TOML/YAML)
into :class:`StepFailed` with a sentence naming the file, so one step's bad
file never crashes the run.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

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


def load_toml(path: Path, display: str | None = None) -> dict[str, Any]:
    __tracebackhide__ = True
    display = display or str(path)
    text = read_text(path, display)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        fail(f"{display} is not valid TOML: {error}. Read it with tomllib to find the broken line.")
    except RecursionError:
        fail(f"{display} is nested too deeply to be a containerd configuration.")


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
        fail(f"{display} is not valid YAML: {' '.join(str(error).split())}")
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
        fail(f"{where} is not valid YAML inside: {' '.join(str(error).split())}")
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
    for key in keys:
        if (isinstance(data, dict) and key in data) or (
            isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data)
        ):
            data = data[key]
        else:
            return default
    return data


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value


# KEY=VALUE; also KEY: VALUE and KEY VALUE where a learner wrote the lab's "lines" that way.
_KEY_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=|:|\s)\s*(.*)$")
_TRAILING_COMMENT = re.compile(r"\s+#.*$")


def parse_key_value_lines(text: str) -> list[tuple[str, str]]:
    """``KEY=VALUE`` lines in order: keys upper-cased, whitespace, a trailing `` # comment``
    and one pair of outer quotes dropped.

    ``#`` comment lines are ignored; ``export KEY=...``, ``KEY: VALUE`` and ``KEY VALUE``
    are accepted. The first separator splits, so a value may contain ``=``.
    """
    pairs: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.lower().startswith("export "):
            line = line[len("export ") :].strip()
        match = _KEY_VALUE.match(line)
        if not match or line.startswith("#"):
            continue
        pairs.append((match.group(1).upper(), _unquote(_TRAILING_COMMENT.sub("", match.group(2)))))
    return pairs


def parse_key_values(text: str) -> dict[str, str]:
    """The ``KEY=VALUE`` lines as a dict (see :func:`parse_key_value_lines`)."""
    return dict(parse_key_value_lines(text))


def read_key_values(
    path: Path, display: str | None = None, required: list[str] | tuple[str, ...] = ()
) -> dict[str, str]:
    """The file's ``KEY=VALUE`` lines; a missing required key or a key given two different values fails."""
    __tracebackhide__ = True
    display = display or str(path)
    values: dict[str, str] = {}
    for key, value in parse_key_value_lines(read_text(path, display)):
        if key in values and values[key] != value:
            fail(f"{display} gives {key} twice ({values[key]} and {value}); keep the one line that is right.")
        values[key] = value
    missing = [key for key in required if key not in values]
    if missing:
        fail(f"{display} is missing {', '.join(f'{k}=' for k in missing)}; write one KEY=VALUE line for each.")
    return values


def split_list(value: str) -> set[str]:
    """``runc,nvidia`` / ``runc nvidia`` / ``[runc, nvidia]`` -> {"runc", "nvidia"}; order-insensitive.

    Example:: split_list(values["LOADED_RUNTIMES"]) == {"runc"}
    """
    value = value.strip().strip("[](){}")
    return {_unquote(item) for item in re.split(r"[,\s]+", value) if _unquote(item)}


_YES = {"yes", "y", "true"}
_NO = {"no", "n", "false"}


def parse_yes_no(value: str) -> bool | None:
    """True for yes/true, False for no/false (any case), None for anything else.

    Example:: parse_yes_no(values["CONFLICT"])  # True for "Yes", None for "maybe"
    """
    lowered = value.strip().lower()
    if lowered in _YES:
        return True
    if lowered in _NO:
        return False
    return None


def parse_quantity_number(value: str, unit: str = "GiB") -> float | None:
    """``40``, ``40GiB``, ``40 GiB``, ``40Gi`` -> 40.0; None when it is not a number.

    Example:: parse_quantity_number("40 GiB")  # 40.0
    """
    text = value.strip()
    unit_pattern = re.escape(unit) + ("|" + re.escape(unit[:-1]) if unit.endswith("B") else "")
    match = re.fullmatch(rf"(-?\d+(?:\.\d+)?)\s*(?:{unit_pattern})?", text, flags=re.I)
    return float(match.group(1)) if match else None


def quantity_bytes(value: object) -> float | None:
    """A Kubernetes quantity (``64Gi``, ``65536Mi``, ``68719476736``, ``250m``) as a number, read by the
    Kubernetes client's own parser; None if it is not one. Rounded to nano units, so ``0.25`` and ``250m``
    are the same cpu.

    Example:: quantity_bytes("128Mi") == 128 * 2**20
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None  # YAML's true is not 1
    from kubernetes.utils.quantity import parse_quantity  # here: the package imports its whole client (~0.15 s)

    try:
        number = float(parse_quantity(value.strip() if isinstance(value, str) else value))
    except ValueError:
        return None
    return round(number, 9) if math.isfinite(number) else None


_EMPTY_AMOUNTS = {"", "<none>", "none", "-", "0", "<nil>", "null"}


def parse_table(text: str) -> list[list[str]]:
    """Rows of a whitespace- or comma-separated table; blank lines dropped."""
    rows = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        line = raw.strip()
        if line.startswith("#") or re.fullmatch(r"[|:\-\s+]+", line):  # comments, Markdown rules
            continue
        cells = [cell.strip() for cell in re.split(r"\s*[,|=]\s*|\s+", line.strip("|").strip())]
        rows.append([cell for cell in cells if cell != ""] or [""])
    return rows


def _amount(cell: str) -> int | str:
    lowered = cell.strip().strip("\"'").lower()
    if lowered in _EMPTY_AMOUNTS:
        return 0
    return int(lowered) if re.fullmatch(r"\d+", lowered) else cell


def read_amount_table(path: Path, display: str | None = None) -> dict[str, list[int | str]]:
    """A NAME/AMOUNT table as {name: [amount, ...]}, one amount per column after the name.

    A header row is skipped; ``node/NAME`` (as ``kubectl -o name`` prints) reads as NAME. A
    missing amount (``<none>``, ``0``, ``-`` or empty) reads as 0; a cell that is not a whole
    number stays text, so the grader can say what it found.
    """
    __tracebackhide__ = True
    display = display or str(path)
    amounts: dict[str, list[int | str]] = {}
    for index, row in enumerate(parse_table(read_text(path, display))):
        name = row[0].rstrip(":").strip("\"'").removeprefix("node/")
        cells = row[1:] or [""]
        if (
            index == 0
            and name.upper() in {"NAME", "NODE", "NODENAME"}
            and not all(re.fullmatch(r"\d+|<none>|-|", c.lower()) for c in cells)
        ):
            continue
        parsed = [_amount(cell) for cell in cells]
        if name in amounts and amounts[name] != parsed:
            fail(f"{display} lists {name} twice; keep the one row that is right.")
        amounts[name] = parsed
    return amounts


def first_lines(text: str, count: int) -> list[str]:
    """The first ``count`` lines that are neither blank nor ``#`` comments, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")][:count]


def without_comments(text: str) -> str:
    """Shell (or Python) text with comments removed: a ``#`` that starts a word starts a comment."""
    return "\n".join(re.sub(r"(^|\s)#.*$", r"\1", line) for line in text.splitlines())
