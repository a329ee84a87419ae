"""A result file's answers against what they must say: ``KEY=VALUE`` lines, each compared by meaning.

    expect_answers(learner.file("out/ds-gap.txt"), {
        "DESIRED": number(2, why="as the DaemonSet's status said", hints={3: "..."}),
        "MISSING_NODE": word("lab-node-2"),
        "STATUS_LOOKS_HEALTHY": yes_no(True),
    })

Every wrong answer of the file is named in one failure, with the hint of each known wrong
value. Forms are lenient as GRADING says (quotes, case, ``yes``/``true``, lists in any order
separated by commas or spaces); meanings are strict. Usable without pytest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .feedback import Words, fail, listed, should_be
from .learner import LearnerFile
from .parsing import parse_yes_no, split_list

Hint = Callable[[str], str | None]


@dataclass(frozen=True)
class Answer:
    """What one key must say: shown as ``expected``, judged by ``accepts``, with a hint for a known wrong value."""

    expected: str
    accepts: Callable[[str], bool]
    why: str | None = None
    hint: Hint | None = None


def _integer(value: str) -> int | None:
    text = value.strip()
    return int(text) if re.fullmatch(r"[+]?\d+", text) else None


def number(expected: int, *, why: str | None = None, hints: Mapping[int, str] | None = None) -> Answer:
    """A whole number; ``hints`` by the wrong number a known mistake writes."""
    known = dict(hints or {})
    return Answer(
        str(expected),
        lambda value: _integer(value) == expected,
        why,
        lambda value: known.get(found) if (found := _integer(value)) is not None else None,
    )


def word(expected: str, *also: str, why: str | None = None, hint: Hint | None = None) -> Answer:
    """One word, in any case; ``also`` are other spellings that mean the same."""
    accepted = {expected.lower(), *(spelling.lower() for spelling in also)}
    return Answer(expected, lambda value: value.strip().lower() in accepted, why, hint)


def yes_no(expected: bool, *, why: str | None = None, hint: str | None = None) -> Answer:
    return Answer("yes" if expected else "no", lambda value: parse_yes_no(value) is expected, why, lambda _: hint)


def items(
    expected: Iterable[str], *, why: str | None = None, hint: Callable[[set[str]], str | None] | None = None
) -> Answer:
    """A list in any order, separated by commas and/or spaces; ``hint`` sees the items written."""
    wanted = set(expected)
    return Answer(
        ",".join(sorted(wanted)) or "empty",
        lambda value: split_list(value) == wanted,
        why,
        (lambda value: hint(split_list(value))) if hint else None,
    )


def count_of(expected: Iterable[str], *, why: str | None = None) -> Answer:
    """How many ``expected`` there are, written as the number or as the items themselves (any order)."""
    wanted = set(expected)
    return Answer(
        f"{len(wanted)} ({','.join(sorted(wanted))})",
        lambda value: _integer(value) == len(wanted) or split_list(value) == wanted,
        why,
    )


def containing(fragment: str, shown_as: str, *, hint: Hint | None = None) -> Answer:
    """Free text that must name ``fragment`` (a scheduler message, say)."""
    return Answer(shown_as, lambda value: fragment.lower() in value.lower(), None, hint)


def expect_answers(file: LearnerFile, answers: Mapping[str, Answer], *, detail: Any = None) -> dict[str, str]:
    """The file's values for ``answers``' keys, when each is right; else one failure naming every wrong one."""
    __tracebackhide__ = True
    values = file.key_values(*answers)
    wrong, hints = [], []
    for key, answer in answers.items():
        if not answer.accepts(values[key]):
            wrong.append(should_be(key, Words(answer.expected), values[key], why=answer.why))
            if answer.hint and (hint := answer.hint(values[key])) and hint not in hints:
                hints.append(hint)
    if wrong:
        fail(
            f"{file}: " + " ".join(wrong), hint=" ".join(hints) or None, detail={"written": values, "expected": detail}
        )
    return values


def missing_and_extra(expected: Iterable[str], found: Iterable[str]) -> str:
    """``"lacks A and has B too"`` between two sets of lines; "" when they are the same."""
    wanted, got = set(expected), set(found)
    parts = []
    if wanted - got:
        parts.append(f"lacks {listed(sorted(wanted - got))}")
    if got - wanted:
        parts.append(f"has {listed(sorted(got - wanted))}, which should not be there")
    return " and ".join(parts)
