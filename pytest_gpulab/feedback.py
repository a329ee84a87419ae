"""What a grader says to the learner, and what it keeps for the instructor.

A grader reports a wrong answer by raising :class:`StepFailed` (through
:func:`fail` or :func:`expect`). The plugin shows the learner only the message
and hint; ``detail`` (live objects, parsed files, script output) goes to a
separate field of the JSON report. Any other exception is an internal error of
the grader and keeps its traceback.
"""

from __future__ import annotations

from typing import Any, NoReturn


class StepFailed(Exception):
    """The learner's work does not meet the step: a message they can act on."""

    def __init__(self, message: str, *, hint: str | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def learner_text(self) -> str:
        return f"{self.message} Hint: {self.hint}" if self.hint else self.message

    def __str__(self) -> str:
        return self.learner_text()


def fail(message: str, *, hint: str | None = None, detail: Any = None) -> NoReturn:
    __tracebackhide__ = True
    raise StepFailed(message, hint=hint, detail=detail)


def expect(condition: object, message: str, *, hint: str | None = None, detail: Any = None) -> None:
    __tracebackhide__ = True
    if not condition:
        raise StepFailed(message, hint=hint, detail=detail)


def shown(value: Any) -> str:
    """A value as the learner wrote it: true/false, "text" in quotes, nothing for a missing one."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if isinstance(value, dict):
        return "a table (" + ", ".join(str(key) for key in value) + ")"
    return str(value)
