"""A bundle's name is the instructor's to trust, not the learner's: a name that could take another learner's row
or break the cohort report is refused with why, and takes no row (issue: fairness in a batch, names)."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_gpulab.cohort.batch import read_roster, results_folders
from pytest_gpulab.cohort.model import REFUSED_FILE
from pytest_gpulab.cohort.report import write_reports


def bundles(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")
    return [folder / name for name in names]


def test_a_hidden_name_does_not_take_another_learner_s_row(tmp_path):
    hidden, real = bundles(tmp_path, ".alice.gpulab.tar.gz", "alice.gpulab.tar.gz")
    folders, refused = results_folders([hidden, real])
    assert folders == {real: "alice"}
    assert "not starting with a dot" in refused[hidden]


def test_a_name_the_batch_writes_is_refused_and_the_report_is_still_written(tmp_path):
    (taken, index, long, fine) = bundles(
        tmp_path / "in", "cohort.csv.gpulab.tar.gz", "index.html.tar.gz", "x" * 65 + ".tgz", "bob.tgz"
    )
    folders, refused = results_folders([taken, index, long, fine])
    assert folders == {fine: "bob"}
    assert "one the batch writes" in refused[taken]
    assert "one the batch writes" in refused[index]
    assert "1 to 64" in refused[long]
    results = tmp_path / "results"
    results.mkdir()
    listed = [{"bundle": b.name, "reason": why} for b, why in refused.items()]
    (results / REFUSED_FILE).write_text(json.dumps({"refused": listed}))
    cohort = write_reports(results)
    assert {entry["bundle"] for entry in cohort.refused} == {taken.name, index.name, long.name}
    assert (results / "cohort.csv").is_file()
    assert "cohort.csv.gpulab.tar.gz" in (results / "cohort.html").read_text()
    assert json.loads((results / "cohort.json").read_text())["refused_bundles"] == listed


def test_two_bundles_that_fold_to_one_learner_are_both_refused(tmp_path):
    upper, lower, other = bundles(tmp_path, "Alice.gpulab.tar.gz", "alice.tgz", "carol.tgz")
    folders, refused = results_folders([upper, lower, other])
    assert folders == {other: "carol"}
    assert "alice.tgz" in refused[upper]
    assert "Alice.gpulab.tar.gz" in refused[lower]
    assert not any(name.endswith("-2") for name in folders.values())


def test_a_roster_names_the_learners_and_refuses_a_bundle_not_on_it(tmp_path):
    roster_file = tmp_path / "roster.csv"
    roster_file.write_text("learner,file\nana,sub-17.tar.gz\nbo,sub-18.tar.gz\n")
    roster = read_roster(roster_file)
    known, unknown = bundles(tmp_path / "in", "sub-17.tar.gz", "sub-99.tar.gz")
    folders, refused = results_folders([known, unknown], roster)
    assert folders == {known: "ana"}
    assert refused == {unknown: "the bundle is not on the roster"}
