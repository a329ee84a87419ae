"""The cohort report as an instructor sees it: a synthetic cohort's RESULTS/ made into cohort.csv,
cohort.json and cohort.html, the page rendered by headless Chromium (the DOM it built and a
screenshot), every figure checked against the cohort that was built, and no network used."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from browser_kit import Node, Png, chromium, decode_png, dump_dom, keep_artifact, needs_chromium, parse_dom
from cohort_page_data import (
    COHORT,
    DISTRIBUTION,
    EARNED,
    FAILED_CHECKS,
    NOT_GRADED,
    OUTCOMES,
    PASS_RATES,
    PERCENTS,
    SCRIPT,
    STEP_OUTCOMES,
    STEPS,
    SUMMARY,
    build_results,
)

from pytest_gpulab.cohort.report import write_reports


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cohort") / "RESULTS"
    build_results(folder)
    write_reports(folder)
    return folder


@pytest.fixture(scope="module")
def report(results: Path) -> dict[str, Any]:
    return json.loads((results / "cohort.json").read_text())


# cohort.csv and cohort.json ------------------------------------------------------------------------


def test_the_csv_has_a_row_per_learner_and_a_column_per_step(results: Path):
    with open(results / "cohort.csv", newline="", encoding="utf-8") as stream:
        header, *rows = list(csv.reader(stream))
    assert header == ["learner", "status", "earned", "possible", "step 1", "step 2", "step 3", "step 4", "reason"]
    graded = {row[0]: row for row in rows if row[1] == "graded"}
    assert {name: int(row[2]) for name, row in graded.items()} == EARNED
    for name, codes in COHORT.items():
        assert graded[name][3:] == ["100", *(OUTCOMES[code] for code in codes), ""]
    others = {row[0]: row for row in rows if row[1] != "graded"}
    assert others == {
        name: [name, status, "", "", "", "", "", "", reason] for name, (status, reason) in NOT_GRADED.items()
    }


def test_the_json_has_each_steps_pass_rate(report: dict[str, Any]):
    assert (report["learners"], report["graded"]) == (14, 12)
    assert [step["number"] for step in report["steps"]] == [1, 2, 3, 4]
    for step in report["steps"]:
        assert step["pass_rate"] == pytest.approx(PASS_RATES[step["number"]])
        assert step["outcomes"] == STEP_OUTCOMES[step["number"]]
        assert (step["title"], step["points"]) == STEPS[step["number"]]
        assert step["graded"] == sum(n for o, n in STEP_OUTCOMES[step["number"]].items() if o != "not graded")


def test_the_json_has_the_score_distribution(report: dict[str, Any]):
    assert [(b["bucket"], b["learners"]) for b in report["score_distribution"]] == list(DISTRIBUTION.items())


def test_the_json_has_the_most_frequent_failing_checks(report: dict[str, Any]):
    for step in report["steps"]:
        found = [(c["check"], c["learners"], {m["message"]: m["learners"] for m in c["messages"]})
                 for c in step["most_failed_checks"]]  # fmt: skip
        assert found == [(check, sum(texts.values()), texts) for check, texts in FAILED_CHECKS[step["number"]]]


def scripts(html: str) -> list[str]:
    """The page's scripts, as markup: script elements and event handlers (a page should have none)."""
    return re.findall(r"(?i)<script|<[^>]*\son[a-z]+\s*=", html)


def test_the_page_refers_to_nothing_outside_itself(results: Path):
    html = (results / "cohort.html").read_text(encoding="utf-8")
    # A link goes within the page, or to a graded learner's evidence page beside it (LEARNER/evidence.html).
    local = r"[\"']?(?:#|[^\"':/]+/evidence\.html[\"'])"
    outside = re.findall(rf"(?i)\b(?:https?|ftp|wss?):|src\s*=|<link|url\(|@import|href\s*=\s*(?!{local})", html)
    assert outside == []
    assert scripts(html) == []
    linked = re.findall(r'href="([^"#]+)/evidence\.html"', html)
    assert linked and all((results / unquote(name) / "evidence.html").is_file() for name in linked)
    for name in linked:
        evidence = (results / unquote(name) / "evidence.html").read_text(encoding="utf-8")
        assert scripts(evidence) == [] and re.findall(r"(?i)src\s*=|<link|href\s*=", evidence) == []


# The page in Chromium ------------------------------------------------------------------------------


@dataclass
class Rendered:
    html: str
    dom: Node
    requests: list[str]
    screenshot: bytes


@pytest.fixture(scope="module")
def rendered(results: Path, tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    # An alert() slipped in (unescaped learner text) holds headless Chromium until the timeout: say so at once.
    assert scripts((results / "cohort.html").read_text(encoding="utf-8")) == [], "the page has a script"
    work = tmp_path_factory.mktemp("chromium")
    html, requests = dump_dom(results / "cohort.html", work)
    screenshot = work / "cohort.png"
    chromium(work / "screenshot-profile", f"--screenshot={screenshot}", "--window-size=1200,2400",
             (results / "cohort.html").as_uri())  # fmt: skip
    keep_artifact(screenshot)
    return Rendered(html, parse_dom(html), requests, screenshot.read_bytes())


@needs_chromium
def test_the_page_requests_nothing_from_the_network(rendered: Rendered, tmp_path: Path):
    assert rendered.requests == []
    # The same watch on a page that does fetch, so an empty list is not the watch seeing nothing.
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><img src="http://127.0.0.1:9/probe.png">')
    assert dump_dom(control, tmp_path)[1] == ["http://127.0.0.1:9/probe.png"]


@needs_chromium
def test_the_summary_counts_the_bundles(rendered: Rendered):
    summary = rendered.dom.one("p", "summary")
    assert (summary.attrs["data-learners"], summary.attrs["data-graded"]) == ("14", "12")
    assert summary.text() == SUMMARY


@needs_chromium
def test_the_score_chart_draws_every_buckets_learners(rendered: Rendered):
    buckets = rendered.dom.one("svg", "score-distribution").select("g", "bucket")
    assert {g.attrs["data-bucket"]: int(g.attrs["data-learners"]) for g in buckets} == DISTRIBUTION
    tallest = max(DISTRIBUTION.values())
    for g in buckets:
        learners = DISTRIBUTION[g.attrs["data-bucket"]]
        assert [t.text() for t in g.select("text")] == [str(learners), g.attrs["data-bucket"]]
        [bar] = g.select("rect")
        assert float(bar.attrs["height"]) * tallest == pytest.approx(150 * learners, abs=tallest)


@needs_chromium
def test_the_pass_rate_chart_draws_every_steps_rate(rendered: Rendered):
    rows = rendered.dom.one("svg", "pass-rates").select("g", "step-rate")
    assert [int(g.attrs["data-step"]) for g in rows] == [1, 2, 3, 4]
    for g in rows:
        number = int(g.attrs["data-step"])
        assert float(g.attrs["data-pass-rate"]) == pytest.approx(PASS_RATES[number], abs=1e-4)
        assert [t.text() for t in g.select("text")] == [f"step {number}", PERCENTS[number]]
        passed, rest = (float(bar.attrs["width"]) for bar in g.select("rect"))
        assert passed / (passed + rest) == pytest.approx(PASS_RATES[number], abs=1e-3)


@needs_chromium
def test_the_steps_table_holds_every_steps_rate_and_outcomes(rendered: Rendered):
    rows = [row for row in rendered.dom.one("table", "steps").select("tr") if "data-step" in row.attrs]
    assert [int(row.attrs["data-step"]) for row in rows] == [1, 2, 3, 4]
    for row in rows:
        number = int(row.attrs["data-step"])
        assert float(row.attrs["data-pass-rate"]) == pytest.approx(PASS_RATES[number])
        counts = [str(STEP_OUTCOMES[number].get(o, 0)) for o in ("passed", "failed", "blocked", "error")]
        graded = sum(n for o, n in STEP_OUTCOMES[number].items() if o != "not graded")
        assert row.cells() == [str(number), STEPS[number][0], PERCENTS[number], str(graded), *counts]


def failing_row(row: Node) -> tuple[int, str, int, dict[str, int]]:
    check, learners, _ = row.cells()
    assert (check, learners) == (row.attrs["data-check"], row.attrs["data-learners"])
    texts = {li.select("span", "message")[0].text(): int(li.select("b")[0].text()) for li in row.select("li")}
    return int(row.attrs["data-step"]), check, int(learners), texts


@needs_chromium
def test_the_failing_checks_are_counted_with_what_learners_were_told(rendered: Rendered):
    found = [failing_row(row) for row in rendered.dom.select("tr", "failing-check")]
    expected = [
        (n, check, sum(texts.values()), texts) for n, checks in FAILED_CHECKS.items() for check, texts in checks
    ]
    assert found == expected


@needs_chromium
def test_every_learner_has_a_row(rendered: Rendered):
    rows = {row.attrs["data-learner"]: row for row in rendered.dom.one("table", "learners").select("tr", "learner")}
    assert list(rows) == sorted([*COHORT, *NOT_GRADED])
    for name, codes in COHORT.items():
        assert rows[name].attrs["data-status"] == "graded"
        assert rows[name].cells() == [name, "graded", f"{EARNED[name]}/100", *(OUTCOMES[code] for code in codes)]
    for name, (status, _) in NOT_GRADED.items():
        assert rows[name].attrs["data-status"] == status
        assert rows[name].cells() == [name, status, "-", "", "", "", ""]


@needs_chromium
def test_the_bundles_not_graded_are_listed_with_why(rendered: Rendered):
    rows = rendered.dom.select("tr", "not-graded")
    assert {row.attrs["data-learner"]: tuple(row.cells()) for row in rows} == {
        name: (name, status, reason) for name, (status, reason) in NOT_GRADED.items()
    }


@needs_chromium
def test_learner_text_is_shown_as_text_never_run(rendered: Rendered):
    assert rendered.dom.select("script") == []
    shown = [span.text() for span in rendered.dom.select("span", "message")]
    assert shown.count(SCRIPT) == 1  # once, with its count of 2
    assert "&lt;script&gt;" in rendered.html


# The screenshot ------------------------------------------------------------------------------------


def bar_areas(dom: Node) -> dict[str, float]:
    """The area each fill colour covers in the two charts, from the DOM."""
    areas: dict[str, float] = {}
    for chart in (dom.one("svg", "score-distribution"), dom.one("svg", "pass-rates")):
        for rect in chart.select("rect"):
            fill = rect.attrs["fill"]
            areas[fill] = areas.get(fill, 0.0) + float(rect.attrs["width"]) * float(rect.attrs["height"])
    return areas


@pytest.fixture(scope="module")
def screenshot(rendered: Rendered) -> Png:
    return decode_png(rendered.screenshot)


@needs_chromium
def test_the_screenshot_is_a_real_picture(screenshot: Png, rendered: Rendered):
    assert (screenshot.width, screenshot.height) == (1200, 2400)
    assert len(rendered.screenshot) > 20_000
    white = b"\xff" * screenshot.pixel
    assert 0.02 < 1 - screenshot.count(white) / (1200 * 2400) < 0.5  # a page of text and charts, mostly white
    assert len(screenshot.colours()) > 30  # text drawn antialiased, cells and bars coloured


@needs_chromium
def test_the_screenshot_shows_the_charts_bars(screenshot: Png, rendered: Rendered):
    """Each chart colour covers, on screen, the area its bars have in the DOM: the bars were drawn."""
    areas = bar_areas(rendered.dom)
    assert len(areas) == 3
    for fill, area in areas.items():
        rgb = bytes.fromhex(fill.removeprefix("#"))
        colour = rgb if screenshot.pixel == 3 else rgb + b"\xff"
        assert screenshot.count(colour) == pytest.approx(area, rel=0.03), fill
