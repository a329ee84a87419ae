"""What ``gpulab selftest`` expects of each row, judged from the grading report, and the matrix it prints.

The rows: the reference passes every step; the untouched start fails or blocks
every step, each with a sentence and no traceback; a form passes every step
(and carries its note); a trap fails exactly its step, saying its words, with
only the steps it ``blocks`` blocked by it and every other step passed. The failing steps' sentences keep the
rules of :mod:`.wording` (no Python rendering, no path of the grader's; sentences over 50 words are reported).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from ..reports.reporting import BLOCKED, ERROR, FAILED, PASSED
from .twin import TWIN_PROBLEMS
from .variants import FORM, TRAP, Variant
from .wording import MOST_WORDS, long_sentences, step_problems

REFERENCE, START = "reference", "start"
MARKS = {PASSED: "P", FAILED: "F", BLOCKED: "B", ERROR: "E"}
SHOWN = 300  # characters of a step's text quoted in a disagreement

Step = dict[str, Any]  # a step of the grading report


@dataclass
class Row:
    """One line of the matrix: what was graded, each step's outcome, and what disagrees with the declaration."""

    kind: str  # reference, start, form or trap
    variant: Variant | None = None
    steps: dict[int, Step] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    error: str | None = None  # it could not be graded
    machine: bool = False  # because the machine could not run it (its lab cluster did not start, twice)
    skipped: str | None = None
    seconds: float = 0.0

    @property
    def label(self) -> str:
        if self.variant is None:
            return "reference" if self.kind == REFERENCE else "untouched start"
        suffix = f" (fails {self.variant.step})" if self.kind == TRAP else ""
        return f"{self.variant.label}{suffix}"

    @property
    def verdict(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        return "MACHINE" if self.machine else "ERROR" if self.error else "DISAGREES" if self.problems else "ok"

    @property
    def disagrees(self) -> bool:
        return bool(self.error or self.problems)

    def marks(self, numbers: list[int]) -> str:
        return " ".join(
            MARKS.get(self.steps[n]["outcome"], "-").rjust(len(str(n))) if n in self.steps else "-".rjust(len(str(n)))
            for n in numbers
        )


def step_text(step: Step) -> str:
    """What the learner reads of a step: its sentence and each unsuccessful check's, with hints, once each."""
    parts = [step, *(check for check in step["checks"] if check["outcome"] != PASSED)]
    errors = [f"(grader error in {c.get('name')}: {c['error']})" for c in step["checks"] if c.get("error")]
    texts = errors + [f"{p['message']} Hint: {p['hint']}" if p.get("hint") else p.get("message") or "" for p in parts]
    return "\n".join(dict.fromkeys(text for text in texts if text))


def judge(row: Row, report: dict[str, Any], lab: str) -> None:
    """Fill ``row`` from the grading report: its steps, and every way they disagree with the declaration."""
    row.steps = {step["number"]: step for step in report["steps"]}
    row.problems += report.get(TWIN_PROBLEMS, [])
    if row.kind == REFERENCE:
        row.problems += _reference(row.steps, lab)
    elif row.kind == START:
        row.problems += _start(row.steps)
    elif row.kind == FORM and row.variant is not None:
        row.problems += _form(row.variant, row.steps)
    elif row.variant is not None:
        row.problems += _trap(row.variant, row.steps)


def _quoted(text: str) -> str:
    text = " / ".join(text.splitlines())
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "…")


def _should_pass(number: int, step: Step) -> str:
    return f"step {number} {step['outcome']}, it should pass: {_quoted(step_text(step))}"


def _reference(steps: dict[int, Step], lab: str) -> list[str]:
    problems = [_should_pass(n, step) for n, step in steps.items() if step["outcome"] != PASSED]
    for number, step in steps.items():
        if not step["title"] or step["points"] <= 0:
            problems.append(f"step {number} has no title or no points")
        problems += [
            f"step {number}'s check {check['id']} is not named {lab}.{number}.NAME"
            for check in step["checks"]
            if not check["id"].startswith(f"{lab}.{number}.")
        ]
    return problems


def _crashed(number: int, text: str, *, error_lines: bool) -> list[str]:
    if "Traceback" in text or (error_lines and any("Error" in line.split(":")[0] for line in text.splitlines())):
        return [f"step {number}'s message shows a crash: {_quoted(text)}"]
    return []


def _blocked(number: int, step: Step, by: int | None) -> list[str]:
    message = step.get("message") or ""
    if step["outcome"] != BLOCKED or (by is not None and by not in step["blocked_by"]):
        return [f"step {number} {step['outcome']}, it should be blocked by step {by}"]
    cause = by if by is not None else (step["blocked_by"] or [None])[0]
    if not message.startswith(f"Blocked by step {cause}:") or f"Because step {cause}" not in message:
        return [f"step {number} is blocked without naming step {cause} and what it said: {_quoted(message)}"]
    return []


def _start(steps: dict[int, Step]) -> list[str]:
    problems: list[str] = []
    for number, step in steps.items():
        text = step_text(step)
        if step["outcome"] == BLOCKED:
            problems += _blocked(number, step, None)
        elif step["outcome"] != FAILED:
            problems.append(f"step {number} {step['outcome']}, it should fail or be blocked: {_quoted(text)}")
        if not text:
            problems.append(f"step {number} fails without a sentence")
        problems += _crashed(number, text, error_lines=False)
        problems += step_problems(number, step)
    return problems


def _form(variant: Variant, steps: dict[int, Step]) -> list[str]:
    problems = [_should_pass(n, step) for n, step in steps.items() if step["outcome"] != PASSED]
    notes = [note for step in steps.values() for check in step["checks"] for note in check.get("notes") or []]
    if variant.note and not any(variant.note in note for note in notes):
        problems.append(f"no feedback note holds {variant.note!r}; the notes: {notes}")
    return problems


def _words(number: int, text: str, says: tuple[str, ...], says_not: tuple[str, ...]) -> list[str]:
    return [f"step {number}'s message lacks {w!r}: {_quoted(text)}" for w in says if w not in text] + [
        f"step {number}'s message holds {w!r}, which it must not: {_quoted(text)}" for w in says_not if w in text
    ]


def _trap(variant: Variant, steps: dict[int, Step]) -> list[str]:
    missing = [n for n in (variant.step, *variant.blocks) if n not in steps]
    if missing:
        return [f"the lab has no step {missing[0]}"]
    problems: list[str] = []
    for number, step in steps.items():
        text = step_text(step)
        if number == variant.step:
            if step["outcome"] != FAILED:
                problems.append(f"step {number} {step['outcome']}, it should fail: {_quoted(text)}")
            problems += _words(number, text, variant.says, variant.says_not)
            problems += _crashed(number, text, error_lines=True)
            problems += step_problems(number, step)
        elif number in variant.blocks:
            problems += _blocked(number, step, variant.step) + _words(number, text, variant.blocked_says, ())
        elif step["outcome"] != PASSED:
            problems.append(_should_pass(number, step))
    return problems


def matrix(lab: str, rows: list[Row]) -> list[str]:
    """The matrix of rows and steps (P passed, F failed, B blocked, E error, - not graded), a verdict per row."""
    numbers = sorted({number for row in rows for number in row.steps})
    width = max(len(row.label) for row in rows)
    lines = [f"{lab:<{width}}  {' '.join(map(str, numbers))}  verdict"]
    lines += [f"{row.label:<{width}}  {row.marks(numbers)}  {row.verdict}" for row in rows]
    return lines


def disagreements(rows: list[Row]) -> list[str]:
    """Each row that disagrees, named, with what disagrees."""
    lines: list[str] = []
    for row in rows:
        if row.disagrees:
            lines.append(f"{row.label}:")
            lines += [f"  {problem}" for problem in ([row.error] if row.error else row.problems)]
    return lines


def messages(rows: list[Row]) -> str:
    """Every trap's message as the learner reads it, for reading them all at once (``--messages FILE``): the
    step it must fail, then that step's sentence and each failing check's, with hints."""
    out = []
    for row in rows:
        if row.kind != TRAP or row.variant is None:
            continue
        step = row.steps.get(row.variant.step or 0)
        text = step_text(step) if step is not None else f"(not graded: {row.error or row.skipped or 'no such step'})"
        long = long_sentences(row.variant.step or 0, step) if step is not None else []
        over = f"\n(over {MOST_WORDS} words: {'; '.join(long)})\n" if long else ""
        out.append(
            f"## {row.variant.name} (step {row.variant.step}, {step['outcome'] if step else '-'})\n\n{text}\n{over}"
        )
    return "\n".join(out)


def report_selftest(lab: str, rows: list[Row], seconds: float, jobs: int, out: TextIO) -> int:
    """Print the matrix, each disagreement and a summary; 0 when every row is as declared, else 1."""
    bad = [row for row in rows if row.disagrees and not row.machine]
    unrun = [row for row in rows if row.machine]
    skipped = [row for row in rows if row.skipped]
    print("\n".join(matrix(lab, rows)), file=out)
    if bad:
        print("\nDisagreements:\n" + "\n".join(disagreements(rows)), file=out)
    summary = f"{lab}: {len(rows) - len(bad) - len(unrun) - len(skipped)} of {len(rows)} rows as declared"
    summary += f", {len(skipped)} skipped" if skipped else ""
    summary += f"; the lab is wrong in {len(bad)}: {', '.join(row.label for row in bad)}" if bad else ""
    summary += f"; the machine could not run {len(unrun)}: {', '.join(row.label for row in unrun)}" if unrun else ""
    print(f"\n{summary} ({seconds:.0f}s, {jobs} at a time)", file=out)
    return 1 if bad or unrun else 0
