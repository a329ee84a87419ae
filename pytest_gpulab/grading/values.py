"""The learner's result files read for meaning: ``KEY=VALUE`` lines (also ``KEY: VALUE``), lists,
yes and no, amounts with their units, and NAME/AMOUNT tables. Strict on meaning, lenient on form;
bad input is a :class:`StepFailed` naming the file."""

from __future__ import annotations

import math
import re
from pathlib import Path

from .feedback import fail
from .parsing import read_text


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


def unresolved_path_hint(text: str, names: set[str], resource: str) -> str | None:
    """A diagnosis for a table whose row for one of ``names`` reads ``<none>`` where ``resource`` should show:
    kubectl prints ``<none>`` where a column's path found nothing, as an unescaped dot in its name does.

    Example:: unresolved_path_hint(learner.file(TABLE).text(), {"lab-node-0"}, "nvidia.com/gpu")
    """
    rows = [row.split() for row in text.splitlines()]
    if not any(row and row[0].removeprefix("node/") in names and "<none>" in row[1:] for row in rows):
        return None
    escaped = resource.replace(".", "\\.")
    return (
        f"<none> is what kubectl prints where a column's path found nothing: {resource} holds dots, which a "
        f"custom-columns or jsonpath path splits at unless they are escaped, as in .status.allocatable.{escaped}."
    )


def decimal_suffix_hint(written: object, expected: str) -> str | None:
    """A diagnosis for a quantity written with the decimal suffix where the binary one was asked: ``128M`` (10^6
    bytes each) for ``128Mi`` (2^20). None for anything else.

    Example:: hint=decimal_suffix_hint(fixed.get("memory"), "128Mi")
    """
    found = re.fullmatch(r"(\d+)([kMGT])", str(written).strip()) if written is not None else None
    if not found or f"{found.group(1)}{found.group(2).upper()}i" != expected:
        return None
    return (
        f"{written} counts in powers of ten ({found.group(2)} is 10^{3 * 'kMGT'.index(found.group(2)) + 3}); "
        f"{expected} counts in powers of two: write the i."
    )
