"""A result file's answers against what they must say: ``KEY=VALUE`` lines, each compared by meaning.

    expect_answers(learner.file("out/ds-gap.txt"), {
        "DESIRED": number(2, why="as the DaemonSet's status said", hints={3: "..."}),
        "MISSING_NODE": word("lab-node-2"),
        "STATUS_LOOKS_HEALTHY": yes_no(True),
    })

Every wrong answer of the file is named in one failure, with the hint of each known wrong
value. Forms are lenient as GRADING says (quotes, case, ``yes``/``true``, lists in any order
separated by commas or spaces); meanings are strict. :func:`expect_all` judges values read
elsewhere (a live object's status) the same way. Usable without pytest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..feedback import Words, expect, listed, same, should_be
from ..learner import LearnerFile
from ..values import parse_yes_no, split_list

Hint = Callable[[Any], str | None]


@dataclass(frozen=True)
class Answer:
    """What one value must say: shown as ``expected`` (``Words`` as written, a value with its type),
    judged by ``accepts``, with a hint for a known wrong value.

    Example:: Answer(Words("a glob of etc/config.toml"), lambda value: value in globs)
    """

    expected: Any
    accepts: Callable[[Any], bool]
    why: str | None = None
    hint: Hint | None = None


def _integer(value: str) -> int | None:
    text = value.strip()
    return int(text) if re.fullmatch(r"[+]?\d+", text) else None


def number(
    expected: int,
    *,
    shown_as: str | None = None,
    why: str | None = None,
    hints: Mapping[int, str] | None = None,
    if_empty: str | None = None,
) -> Answer:
    """A whole number; ``hints`` by the wrong number a known mistake writes, ``if_empty`` for a value written empty
    (the cause a command that printed nothing has, where the step knows it).

    Example:: number(2, why="as the status said", hints={3: "DESIRED drops with the taint."})
    """
    known = dict(hints or {})

    def hint(value: Any) -> str | None:
        if isinstance(value, str) and not value.strip():
            return if_empty
        return known.get(found) if (found := _integer(value)) is not None else None

    return Answer(Words(shown_as or str(expected)), lambda value: _integer(value) == expected, why, hint)


def word(expected: str, *also: str, why: str | None = None, hint: Hint | None = None) -> Answer:
    """One word, in any case; ``also`` are other spellings that mean the same.

    Example:: word("lab-node-2", why="the tainted node lost its Pod")
    """
    accepted = {expected.lower(), *(spelling.lower() for spelling in also)}
    return Answer(Words(expected), lambda value: value.strip().lower() in accepted, why, hint)


def _letters(value: str) -> str:
    return re.sub(r"[^a-z]", "", value.lower())


def phrase(
    expected: str, *also: str, shown_as: str | None = None, why: str | None = None, hint: Hint | None = None
) -> Answer:
    """A few words compared by their letters alone, so case, spaces, dashes and digits do not count
    (``Insufficient memory`` is ``insufficient-memory``); ``also`` are other phrases that mean the same.

    Example:: phrase("node", "kubelet", "the node", why="only the node's runtime knows its handlers")
    """
    accepted = {_letters(text) for text in (expected, *also)}
    return Answer(Words(shown_as or expected), lambda value: _letters(value) in accepted, why, hint)


def yes_no(expected: bool, *, why: str | None = None, hint: str | None = None) -> Answer:
    """yes or no, written as ``yes``/``no`` or ``true``/``false`` in any case.

    Example:: yes_no(True, why="READY equals DESIRED")
    """
    return Answer(
        Words("yes" if expected else "no"), lambda value: parse_yes_no(value) is expected, why, lambda _: hint
    )


def items(
    expected: Iterable[str], *, why: str | None = None, hint: Callable[[set[str]], str | None] | None = None
) -> Answer:
    """A list in any order, separated by commas and/or spaces; ``hint`` sees the items written.

    Example:: items({"research/a100-job"}, why="the Pods on the node that no DaemonSet owns")
    """
    wanted = set(expected)
    return Answer(
        Words(",".join(sorted(wanted)) or "empty"),
        lambda value: split_list(value) == wanted,
        why,
        (lambda value: hint(split_list(value))) if hint else None,
    )


def count_of(expected: Iterable[str], *, why: str | None = None) -> Answer:
    """How many ``expected`` there are, written as the number or as the items themselves (any order).

    Example:: count_of(lab.environment.node_names, why="every node carries the label")
    """
    wanted = set(expected)
    one_more = (
        f"{len(wanted) + 1} is one more than there are: a count of lines that took in a header line (kubectl get "
        "without --no-headers) or an empty one."
    )
    return Answer(
        Words(f"{len(wanted)} ({','.join(sorted(wanted))})"),
        lambda value: _integer(value) == len(wanted) or split_list(value) == wanted,
        why,
        lambda value: one_more if _integer(value) == len(wanted) + 1 else None,
    )


def containing(fragment: str, shown_as: str, *, hint: Hint | None = None) -> Answer:
    """Free text that must name ``fragment`` (a scheduler message, say).

    Example:: containing("Insufficient nvidia.com/gpu", 'the scheduler\'s message, naming "Insufficient nvidia.com/gpu"')
    """
    return Answer(Words(shown_as), lambda value: fragment.lower() in value.lower(), None, hint)


def exactly(expected: Any, *, why: str | None = None, hint: str | None = None) -> Answer:
    """``expected`` itself, type included: ``3``, not ``"3"`` or ``3.0`` (the failure names a wrong type).

    Example:: exactly(3, why="three machines in the pool")
    """
    return Answer(expected, lambda value: same(value, expected), why, lambda _: hint)


def expect_all(where: str, found: Mapping[str, Any], answers: Mapping[str, Answer], *, detail: Any = None) -> None:
    """Each value of ``found`` judged by the answer of the same name: one failure, opened by ``where``,
    naming every wrong one, with the hint of each known wrong value.

    Example:: expect_all("In the cluster, the pool worker", {"status.machineCount": 2}, {"status.machineCount": exactly(3)})
    """
    __tracebackhide__ = True
    wrong, hints = [], []
    for key, answer in answers.items():
        if not answer.accepts(found.get(key)):
            wrong.append(should_be(key, answer.expected, found.get(key), why=answer.why))
            if answer.hint and (hint := answer.hint(found.get(key))) and hint not in hints:
                hints.append(hint)
    expect(not wrong, f"{where}: " + " ".join(wrong), hint=" ".join(hints) or None, detail=detail)


def expect_answers(file: LearnerFile, answers: Mapping[str, Answer], *, detail: Any = None) -> dict[str, str]:
    """The file's values for ``answers``' keys, when each is right; else one failure naming every wrong one.

    Example:: expect_answers(learner.file("out/blast.txt"), {"DEFAULT_RUNTIME": word("nvidia")})
    """
    __tracebackhide__ = True
    values = file.key_values(*answers)
    empty = [key for key, answer in answers.items() if values.get(key) == "" and not answer.accepts("")]
    if empty and all(values.get(key) == "" or answer.accepts(values.get(key)) for key, answer in answers.items()):
        hint = (
            f"{listed(empty)} {'is' if len(empty) == 1 else 'are'} written empty: the command that filled "
            f"{'it' if len(empty) == 1 else 'them'} printed nothing. Run it alone and look at what it prints."
        )
        answers = {key: replace(answer, hint=_or_else(answer.hint, hint)) for key, answer in answers.items()}
    expect_all(str(file), values, answers, detail={"written": values, "expected": detail})
    return values


def _or_else(own: Hint | None, otherwise: str) -> Hint:
    """The answer's own hint for a value, or else ``otherwise``."""
    return lambda value: (own(value) if own else None) or otherwise
