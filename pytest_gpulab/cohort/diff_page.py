"""The regrade diff as a section of ``cohort.html`` (``grade-batch --compare OLD``): the summary, each step's
learners who gained, lost or kept its points, and every learner whose result changed, with the checks.
Every text is escaped; each figure is also in a ``data-`` attribute, as the rest of the page does."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the page needs no more of the diff than its data: its imports stay shallow
    from .diff import Diff, LearnerDiff
    from .results import Result

GAINED, LOST, SAME = "gained", "lost", "same"  # diff.py's kinds, as its summary's keys


def _points(result: Result | None) -> str:
    if result is None:
        return "no bundle"
    if not result.graded:
        return escape(result.status)
    return f"{result.earned}/{result.possible} (rubric {escape(result.rubric or '?')})"


def _summary(diff: Diff) -> str:
    cells = "".join(
        f'<tr class="diff-kind" data-kind="{escape(kind)}" data-learners="{count}"><td>{escape(kind)}</td>'
        f"<td class='num'>{count}</td></tr>"
        for kind, count in diff.counts().items()
    )
    return f'<table id="diff-summary"><tr><th>learners who</th><th>count</th></tr>{cells}</table>'


def _steps(diff: Diff) -> str:
    rows = "".join(
        f'<tr class="diff-step" data-step="{n}" data-gained="{s[GAINED]}" data-lost="{s[LOST]}" data-same="{s[SAME]}">'
        f"<td>{n}</td><td>{escape(str(s['title']))}</td><td class='num'>{s[GAINED]}</td>"
        f"<td class='num'>{s[LOST]}</td><td class='num'>{s[SAME]}</td></tr>"
        for n, s in diff.steps.items()
    )
    head = "<tr><th>step</th><th>title</th><th>gained</th><th>lost</th><th>same</th></tr>"
    return f'<table id="diff-steps">{head}{rows}</table>'


def _learner(row: LearnerDiff) -> str:
    checks = "".join(
        f"<li data-check='{escape(c.check)}'>{escape(c.check)} (step {c.step}): {escape(c.old)} → {escape(c.new)}</li>"
        for c in row.checks
    )
    notes = "".join(f"<li class='message'>{escape(note)}</li>" for note in row.notes)
    return (
        f'<tr class="diff-learner" data-learner="{escape(row.learner)}" data-change="{escape(row.change)}">'
        f"<td>{escape(row.learner)}</td><td>{escape(row.change)}</td><td>{_points(row.old)}</td>"
        f"<td>{_points(row.new)}</td><td><ul>{checks}{notes}</ul></td></tr>"
    )


def diff_section(diff: Diff) -> str:
    changed = [row for row in diff.learners if row.change != SAME or row.checks or row.notes]
    rows = "".join(_learner(row) for row in changed)
    learners = (
        '<table id="diff-learners"><tr><th>learner</th><th>change</th><th>before</th><th>after</th>'
        f"<th>checks changed</th></tr>{rows}</table>"
        if changed
        else "<p>No learner's result changed.</p>"
    )
    return (
        f"<h2 id='regrade'>Regrade: compared with {escape(diff.old_folder)}</h2>{_summary(diff)}"
        f"<h3>Per step</h3>{_steps(diff)}<h3>Learners whose result changed</h3>{learners}"
    )
