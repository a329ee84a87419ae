"""The terminal summary: one row per step at 80 columns, the sentence that says why under it, then the total."""

from __future__ import annotations

import textwrap

from .reporting import BLOCKED, NOT_GRADED, PASSED, StepResult, first_text

WIDTH = 80
TITLE_WIDTH = 54  # the widest row, "not graded", is then 80 columns
MESSAGE_LINES = 4
INDENT = " " * 8


def _title(text: str) -> str:
    return text if len(text) <= TITLE_WIDTH else text[: TITLE_WIDTH - 3] + "..."


def step_row(result: StepResult) -> str:
    points = f"{result.earned}/{result.possible}" if result.outcome != NOT_GRADED else f"-/{result.possible}"
    return f"{result.step.number:>4}  {_title(result.step.title):<{TITLE_WIDTH}} {points:>7}  {result.outcome}"


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(
        " ".join(text.split()),
        WIDTH,
        initial_indent=INDENT,
        subsequent_indent=INDENT,
        max_lines=MESSAGE_LINES,
        placeholder=" ...",
    )


def why_lines(result: StepResult, said: dict[str, int]) -> list[str]:
    """The first failing check's sentence (named, when the step has several checks), and which others say
    something else; a sentence an earlier step already printed is referred to, not repeated."""
    if result.outcome in (PASSED, NOT_GRADED) or not result.message:
        return []
    text = first_text(result) or ""
    if text in said:
        return _wrapped(f"The same cause as step {said[text]}.")
    said[text] = result.step.number
    failing = [run for run in result.checks if run.outcome not in (PASSED, NOT_GRADED) and run.message]
    speaker = next((run for run in failing if run.outcome == result.outcome), None)
    named = f"{speaker.check.name}: " if speaker is not None and len(result.checks) > 1 else ""
    others = [
        run.check.name
        for run in failing
        if run.outcome != BLOCKED and speaker is not None and run.learner_text != speaker.learner_text
    ]
    lines = _wrapped(named + text)
    if others:
        lines += _wrapped(f"(and {len(others)} more: {', '.join(others)}; -v or the report says what)")
    return lines


def terminal_lines(results: list[StepResult], lab: str, rubric: str, seed: int, notes: list[str]) -> list[str]:
    """The table of steps, the total, then the notes for the learner."""
    lines = [f"{'step':>4}  {'title':<{TITLE_WIDTH}} {'points':>7}  outcome"]
    said: dict[str, int] = {}
    for result in results:
        lines += [step_row(result), *why_lines(result, said)]
    left_out = [str(result.step.number) for result in results if result.outcome == NOT_GRADED]
    total = f"total: {sum(r.earned for r in results)}/{sum(r.possible for r in results)} points"
    if left_out:
        total += f" (step{'s' * (len(left_out) > 1)} {', '.join(left_out)} not graded)"
    lines.append(f"{total} · lab {lab} · rubric {rubric} · seed {seed}")
    return lines + [line for note in notes for line in textwrap.wrap(note, WIDTH)]
