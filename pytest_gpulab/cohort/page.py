"""``cohort.html``: one self-contained page (inline CSS and SVG, no script, nothing fetched).

It shows the score distribution, each step's pass rate, each step's most frequent
failing checks with their learner messages, every learner's row, and the bundles
that were not graded; each graded learner's name links to a page of every check's
evidence (``LEARNER/evidence.html``, :func:`pytest_gpulab.reports.explain.explain_html`). Each number a chart draws is also in a ``data-`` attribute
and in text, so a reader, a screen reader and a test read the same figures.
"""

from __future__ import annotations

from html import escape
from statistics import mean, median
from urllib.parse import quote

from .model import Cohort, Learner, Step
from .regrade import GRADED

EVIDENCE_PAGE = "evidence.html"

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f3f3f3; text-align: left; } td.num { text-align: right; }
.passed { background: #d8f0d8; } .failed { background: #f6d5d5; } .blocked { background: #f3e7c9; }
.error, .refused { background: #e4e4e4; } .message { color: #444; max-width: 700px; }
svg text { font: 12px system-ui, sans-serif; }
"""


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.0f}%"


def distribution_chart(cohort: Cohort) -> str:
    buckets = cohort.score_distribution()
    tallest = max([b["learners"] for b in buckets] + [1])
    bars = []
    for index, bucket in enumerate(buckets):
        height, x = 150 * bucket["learners"] // tallest, 40 + index * 60
        bars.append(
            f'<g class="bucket" data-bucket="{bucket["bucket"]}" data-learners="{bucket["learners"]}">'
            f'<rect x="{x}" y="{170 - height}" width="48" height="{height}" fill="#4a7fb5"/>'
            f'<text x="{x + 24}" y="{165 - height}" text-anchor="middle">{bucket["learners"]}</text>'
            f'<text x="{x + 24}" y="188" text-anchor="middle">{escape(bucket["bucket"])}</text></g>'
        )
    return (
        '<svg id="score-distribution" role="img" aria-label="learners by score" width="720" height="200">'
        '<line x1="36" y1="170" x2="704" y2="170" stroke="#888"/>' + "".join(bars) + "</svg>"
    )


def pass_rate_chart(cohort: Cohort) -> str:
    rows = []
    for index, step in enumerate(cohort.steps.values()):
        rate, y = step.pass_rate or 0.0, 10 + index * 26
        rows.append(
            f'<g class="step-rate" data-step="{step.number}" data-pass-rate="{rate:.4f}">'
            f'<text x="0" y="{y + 14}">step {step.number}</text>'
            f'<rect x="60" y="{y}" width="{400 * rate:.1f}" height="18" fill="#4a9a5a"/>'
            f'<rect x="{60 + 400 * rate:.1f}" y="{y}" width="{400 * (1 - rate):.1f}" height="18" fill="#e8c4c4"/>'
            f'<text x="470" y="{y + 14}">{_percent(step.pass_rate)}</text></g>'
        )
    height = 20 + 26 * len(cohort.steps)
    return f'<svg id="pass-rates" role="img" aria-label="pass rate by step" width="520" height="{height}">{"".join(rows)}</svg>'


def steps_table(cohort: Cohort) -> str:
    head = (
        "<tr><th>step</th><th>title</th><th>pass rate</th><th>graded</th><th>passed</th><th>failed</th>"
        "<th>blocked</th><th>error</th></tr>"
    )
    rows = [
        f'<tr data-step="{s.number}" data-pass-rate="{s.pass_rate if s.pass_rate is not None else ""}">'
        f"<td>{s.number}</td><td>{escape(s.title)}</td><td class='num'>{_percent(s.pass_rate)}</td>"
        f"<td class='num'>{s.graded}</td>"
        + "".join(f"<td class='num'>{s.outcomes[o]}</td>" for o in ("passed", "failed", "blocked", "error"))
        + "</tr>"
        for s in cohort.steps.values()
    ]
    return f'<table id="steps">{head}{"".join(rows)}</table>'


def failing_section(step: Step) -> str:
    checks = step.top_failing()
    if not checks:
        return ""
    rows = []
    for check in checks:
        messages = "".join(
            f"<li><b>{m['learners']}</b> × <span class='message'>{escape(m['message'])}</span></li>"
            for m in check["messages"]
        )
        rows.append(
            f'<tr class="failing-check" data-step="{step.number}" data-check="{escape(check["check"])}" '
            f'data-learners="{check["learners"]}"><td>{escape(check["check"])}</td>'
            f"<td class='num'>{check['learners']}</td><td><ul>{messages}</ul></td></tr>"
        )
    return (
        f"<h3>Step {step.number}: {escape(step.title)}</h3><table><tr><th>failing check</th><th>learners</th>"
        f"<th>what they were told</th></tr>{''.join(rows)}</table>"
    )


def _evidence_link(learner: Learner) -> str:
    """A graded learner's name, linking to the page of every check's evidence (``LEARNER/evidence.html``)."""
    if learner.status != GRADED:
        return escape(learner.learner)
    return f'<a href="{escape(quote(learner.learner))}/{EVIDENCE_PAGE}">{escape(learner.learner)}</a>'


def learners_table(cohort: Cohort) -> str:
    numbers = list(cohort.steps)
    head = "<tr><th>learner</th><th>status</th><th>points</th>" + "".join(f"<th>{n}</th>" for n in numbers) + "</tr>"
    rows = []
    for x in cohort.learners:
        points = f"{x.earned}/{x.possible}" if x.earned is not None else "-"
        cells = "".join(f"<td class='{escape(x.steps.get(n, ''))}'>{escape(x.steps.get(n, ''))}</td>" for n in numbers)
        rows.append(
            f'<tr class="learner" data-learner="{escape(x.learner)}" data-status="{escape(x.status)}">'
            f"<td>{_evidence_link(x)}</td><td class='{escape(x.status)}'>{escape(x.status)}</td>"
            f"<td class='num'>{points}</td>{cells}</tr>"
        )
    return f'<table id="learners">{head}{"".join(rows)}</table>'


def not_graded_table(cohort: Cohort) -> str:
    rows = [
        f'<tr class="not-graded" data-learner="{escape(x.learner)}"><td>{escape(x.learner)}</td>'
        f"<td>{escape(x.status)}</td><td class='message'>{escape(x.reason or '')}</td></tr>"
        for x in cohort.learners
        if x.status != "graded"
    ]
    rows += [
        f'<tr class="refused-by-name" data-bundle="{escape(entry.get("bundle", ""))}"><td>{escape(entry.get("bundle", ""))}'
        f"</td><td>refused</td><td class='message'>{escape(entry.get('reason', ''))}</td></tr>"
        for entry in cohort.refused
    ]
    if not rows:
        return "<p>Every bundle was graded.</p>"
    return f'<table id="not-graded"><tr><th>learner</th><th>status</th><th>why</th></tr>{"".join(rows)}</table>'


def summary(cohort: Cohort) -> str:
    scores = [100 * (x.earned or 0) / max(x.possible or 1, 1) for x in cohort.graded]
    figures = f"mean {mean(scores):.0f}%, median {median(scores):.0f}%" if scores else "no scores"
    return (
        f'<p id="summary" data-learners="{len(cohort.learners)}" data-graded="{len(cohort.graded)}">'
        f"{len(cohort.learners)} bundles, {len(cohort.graded)} graded; {figures}. "
        f"Lab {escape(', '.join(cohort.labs) or '-')}, rubric {escape(', '.join(cohort.rubrics) or '-')}.</p>"
    )


def page(cohort: Cohort, sections: str = "") -> str:
    """The page; ``sections`` (HTML already escaped, such as the regrade diff's) go after the bundles not graded."""
    failing = "".join(failing_section(step) for step in cohort.steps.values()) or "<p>No check failed.</p>"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Cohort report: {escape(', '.join(cohort.labs))}</title><style>{STYLE}</style></head><body>"
        f"<h1>Cohort report: {escape(', '.join(cohort.labs) or 'no lab')}</h1>{summary(cohort)}"
        f"<h2>Score distribution</h2>{distribution_chart(cohort)}"
        f"<h2>Pass rate by step</h2>{pass_rate_chart(cohort)}{steps_table(cohort)}"
        f"<h2>Most frequent failing checks</h2>{failing}"
        f"<h2>Learners</h2>{learners_table(cohort)}"
        f"<h2>Not graded</h2>{not_graded_table(cohort)}{sections}</body></html>\n"
    )
