"""What a grader says to the learner, and what it keeps for the instructor.

A grader reports a wrong answer by raising :class:`StepFailed` (through
:func:`fail`, :func:`expect` or :func:`expect_value`). The plugin shows the
learner only the message and hint; ``detail`` (live objects, parsed files,
script output) goes to a separate field of the report. :func:`blocked_unless`
says that something an earlier step makes is missing (the outcome *blocked*);
:class:`GradingError` that grading itself could not go on, e.g. the cluster
stopped answering (the outcome *error*, which an autograder may retry). Any
other exception is an internal error of the grader and keeps its traceback.

:func:`should_be` is the one way to say "X should be A, found B": when B is A
written as the wrong type (``"true"`` for true, ``2.0`` for 2) it names that
cause, so the learner reads why, not only what.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

HEADLINE_WORDS = 50  # a learner's sentence at most; what does not fit goes in the hint or the check's detail


def with_hint(message: str | None, hint: str | None) -> str | None:
    """What a learner reads of a failure: the message, then ``Hint:`` and the hint when there is one."""
    return f"{message} Hint: {hint}" if message and hint else message


class StepFailed(Exception):
    """The learner's work does not meet the step: a message they can act on.

    Example:: StepFailed(should_be("ISOLATION", Words("none"), value), hint="...")
    """

    def __init__(self, message: str, *, hint: str | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def learner_text(self) -> str:
        return with_hint(self.message, self.hint) or ""

    def __str__(self) -> str:
        return self.learner_text()


class StepBlocked(StepFailed):
    """The step needs what an earlier step makes, and it is missing: not this step's fault."""

    def __init__(self, message: str, *, step: int | tuple[int, ...] | None = None, detail: Any = None) -> None:
        super().__init__(message, detail=detail)
        self.step = step  # the step(s) that make it; None: the step marker's ``needs``


class GradingError(StepFailed):
    """Grading could not go on (an unreachable cluster, say): an error to retry, not a wrong answer.

    Example:: raise GradingError("The lab cluster did not answer.")
    """


class MachineBusy(GradingError):
    """A learner's script ran out of time because the machine gave it no CPU: graded again, never failed."""


def blocked_unless(condition: object, missing: str, *, step: int | None = None, detail: Any = None) -> None:
    """Block the step, naming what is ``missing`` ("the Pod gpu-lab/cuda-probe"), unless ``condition``.

    ``step`` is the step that makes it, when the step marker's ``needs`` names several.

    Example:: blocked_unless(pod, "the Pod gpu-lab/cuda-probe, which step 5 creates,")
    """
    __tracebackhide__ = True
    if not condition:
        raise StepBlocked(f"{missing[:1].upper()}{missing[1:]} is missing.", step=step, detail=detail)


def fail(message: str, *, hint: str | None = None, detail: Any = None) -> NoReturn:
    """Fail the check with ``message``, a sentence the learner can act on; ``detail`` is for the instructor.

    Example:: fail("data.any is a YAML mapping, not a string.", hint="Write it as a block scalar, any: |-")
    """
    __tracebackhide__ = True
    raise StepFailed(message, hint=hint, detail=detail)


def expect(condition: object, message: str, *, hint: str | None = None, detail: Any = None) -> None:
    """Fail with ``message`` (and ``hint``) unless ``condition`` holds.

    Example:: expect(live.get("Namespace", "gpu-rt"), "The namespace gpu-rt does not exist in the cluster; create it.")
    """
    __tracebackhide__ = True
    if not condition:
        raise StepFailed(message, hint=hint, detail=detail)


class Words(str):
    """An expectation described in words ("an array"), shown as it is, without quotes.

    Example:: should_be("imports", Words("a top-level array"), found)  # no quotes around the words
    """


def shown(value: Any) -> str:
    """A value as the learner wrote it: true/false, "text" in quotes, nothing for a missing one, a table with its
    keys and values ({cpu: "300m"}), never Python's rendering of it.

    Example:: shown(None)  # "nothing"; shown("2") is '"2"'; shown({"cpu": "300m"}) is '{cpu: "300m"}'
    """
    if isinstance(value, Words):
        return str(value)
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if isinstance(value, dict):
        written = "{" + ", ".join(f"{key}: {shown(item)}" for key, item in value.items()) + "}"
        return written if len(written) <= SHOWN_LENGTH else written[: SHOWN_LENGTH - 2] + "…}"
    return str(value)


SHOWN_LENGTH = 240  # characters of a table shown whole; a longer one is cut


def same(found: Any, expected: Any) -> bool:
    """Equal and of the same kind: the string "true" is not true, 2.0 is not 2, true is not 1."""
    return type(found) is type(expected) and found == expected


def type_cause(expected: Any, found: Any) -> str:
    """Why a value that reads right is still wrong: its type; "" when that is not the cause."""
    if isinstance(expected, bool) and isinstance(found, str) and found.strip().lower() == str(expected).lower():
        return ": a string, not a boolean"
    if type(expected) is int and isinstance(found, float) and found == expected:
        return ": a float, not an integer"
    if type(expected) is int and isinstance(found, str) and found.strip() == str(expected):
        return ": a string, not an integer"
    if isinstance(expected, str) and type(found) in (int, float) and str(found) == expected:
        return ": a number, not a string"
    return ""


def should_be(what: str, expected: Any, found: Any, *, why: str | None = None) -> str:
    """'{what} should be {expected} ({why}), found {found}.' with the type's cause when it is one.

    Example:: should_be("version", 2, "2")  # 'version should be 2, found "2": a string, not an integer.'
    """
    because = f" ({why})" if why else ""
    return f"{what} should be {shown(expected)}{because}, found {shown(found)}{type_cause(expected, found)}."


def expect_value(
    found: Any, expected: Any, what: str, *, why: str | None = None, hint: str | None = None, detail: Any = None
) -> None:
    """Fail with :func:`should_be` unless ``found`` is ``expected``, type included.

    Example:: expect_value(dig(pod, "metadata", "namespace"), "gpu-lab", "the Pod's namespace")
    """
    __tracebackhide__ = True
    if not same(found, expected):
        raise StepFailed(should_be(what, expected, found, why=why), hint=hint, detail=detail)


def listed(items: Iterable[str], conjunction: str = "and", *, most: int | None = None) -> str:
    """``a``, ``a and b``, ``a, b and c``; with ``most``, at most that many named (``a, b and 5 more``).

    Example:: listed(["a", "b", "c"])  # "a, b and c"
    """
    names = list(items)
    if most is not None and len(names) > most:
        return f"{', '.join(names[:most])} {conjunction} {len(names) - most} more"
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


def missing_and_extra(expected: Iterable[str], found: Iterable[str], most: int | None = None) -> str:
    """``"lacks A and has B too"`` between two sets of lines (with ``most``, that many of each named); "" when they
    are the same."""
    wanted, got = set(expected), set(found)
    parts = []
    if wanted - got:
        parts.append(f"lacks {listed(sorted(wanted - got), most=most)}")
    if got - wanted:
        parts.append(f"has {listed(sorted(got - wanted), most=most)}, which should not be there")
    return " and ".join(parts)
