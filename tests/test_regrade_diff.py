"""The regrade diff on a real regrade: a small gpuop cohort graded, then graded again by a stricter grader (a check
of step 3 made stricter in a copied lab folder, `--lab-dir`, with a new rubric version), and `gpulab cohort-diff`
read against the changes made. One learner's bundle is only in the first batch, another's only in the second."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cohort_cases import VARIANTS
from gpuop_states import solve

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import write_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.selftest.variants import copy_root, load_variants

pytestmark = pytest.mark.timeout(1200)
GPULAB = str(Path(sys.executable).with_name("gpulab"))
FORM = "merge-loose-form"  # writes "LOADED_RUNTIMES= runc ": right, and now too loose
TRAP = "version-string"  # fails step 1; graded only in the first batch
LATE = "late"  # the reference's bundle, handed in only for the second batch
STRICTER = """
def test_loaded_runtimes(learner):
    import re

    expect(
        re.search(r"^LOADED_RUNTIMES=\\S", learner.file(MERGE).text(), re.MULTILINE) is not None,
        f"{MERGE}: write LOADED_RUNTIMES=... in capitals, with nothing between the = and the value.",
    )
    written = learner.file(MERGE).key_values("LOADED_RUNTIMES")["LOADED_RUNTIMES"]
    expect(answers.split_list(written) == {"runc"}, f"{MERGE}: LOADED_RUNTIMES should be runc.")
"""


@dataclass
class Regrade:
    base: Path
    old: Path
    new: Path
    batch: subprocess.CompletedProcess[str]
    diff: subprocess.CompletedProcess[str]


def _bundles(base: Path) -> Path:
    """reference, the form and the trap, each a lab root bundled with the reference's cluster."""
    bundles, lab = base / "old-bundles", discover().get("gpuop")
    bundles.mkdir()
    root = base / "reference-root"
    root.mkdir()
    variants = {variant.name: variant for variant in load_variants(VARIANTS)}
    with KwokCluster.for_lab("gpuop", name="tests-regrade-diff") as cluster:
        solve(cluster, root)
        write_bundle(lab, root, cluster, bundles / "reference.gpulab.tar.gz", learner="reference")
        for name in (FORM, TRAP):
            variant_root = copy_root(root, base / "roots" / name)
            variants[name].apply_edits(variant_root)
            write_bundle(lab, variant_root, cluster, bundles / f"{name}.gpulab.tar.gz", learner=name)
    return bundles


def _stricter_lab(base: Path) -> Path:
    """graders/gpuop copied, rubric 2 -> 3, step 3's loaded-runtimes check stricter (it replaces the original)."""
    labs = base / "labs"
    lab = shutil.copytree(VARIANTS, labs / "gpuop", ignore=shutil.ignore_patterns("__pycache__"))
    toml = lab / "lab.toml"
    assert 'rubric_version = "2"' in toml.read_text()
    toml.write_text(toml.read_text().replace('rubric_version = "2"', 'rubric_version = "3"'))
    step3 = lab / "step3_merge.py"
    step3.write_text(step3.read_text() + STRICTER)
    return labs


def _batch(bundles: Path, out: Path, secret: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GPULAB, "grade-batch", str(bundles), "--jobs", "2", "--out", str(out), "--seed-secret", str(secret), *extra],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def regrade(tmp_path_factory) -> Regrade:
    base = tmp_path_factory.mktemp("regrade")
    secret = base / "seed-secret"
    secret.write_text("a fixed secret for both batches\n")
    old_bundles = _bundles(base)
    new_bundles = base / "new-bundles"
    new_bundles.mkdir()
    for name in ("reference", FORM):
        shutil.copy(old_bundles / f"{name}.gpulab.tar.gz", new_bundles)
    shutil.copy(old_bundles / "reference.gpulab.tar.gz", new_bundles / f"{LATE}.gpulab.tar.gz")
    old, new = base / "results-old", base / "results-new"
    first = _batch(old_bundles, old, secret)
    assert first.returncode == 0, first.stderr[-3000:]
    batch = _batch(new_bundles, new, secret, f"--lab-dir={_stricter_lab(base)}", f"--compare={old}")
    diff = subprocess.run([GPULAB, "cohort-diff", str(old), str(new), "--out", str(base / "diff")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)  # fmt: skip
    return Regrade(base, old, new, batch, diff)


def _step3_check(results: Path) -> str:
    report = json.loads((results / "reference" / "report.json").read_text())
    [step] = [step for step in report["steps"] if step["number"] == 3]
    [check] = [check["id"] for check in step["checks"] if check["id"].endswith("loaded-runtimes")]
    return check


def test_the_diff_rows_are_the_changes_made(regrade: Regrade):
    assert regrade.batch.returncode == 0, regrade.batch.stderr[-3000:]
    assert regrade.diff.returncode == 0, regrade.diff.stderr[-3000:]
    with open(regrade.base / "diff" / "diff.csv", newline="", encoding="utf-8") as stream:
        rows = {row["learner"]: row for row in csv.DictReader(stream)}
    assert set(rows) == {"reference", FORM, TRAP, LATE}
    check = _step3_check(regrade.old)
    form = rows[FORM]
    assert (form["change"], form["old earned"], form["new earned"]) == ("lost", "100", "90"), form
    assert (form["old rubric"], form["new rubric"]) == ("2", "3"), form
    assert (form["checks changed"], form["changed checks"]) == ("1", f"{check} (step 3): passed -> failed"), form
    reference = rows["reference"]
    assert (reference["change"], reference["old earned"], reference["new earned"]) == ("same", "100", "100")
    assert (reference["checks changed"], reference["new rubric"]) == ("0", "3"), reference
    assert (rows[TRAP]["change"], rows[TRAP]["old status"], rows[TRAP]["new status"]) == ("only in old", "graded", "")
    assert (rows[LATE]["change"], rows[LATE]["old status"], rows[LATE]["new earned"]) == ("only in new", "", "100")


def test_the_summary_counts_learners_and_steps(regrade: Regrade):
    report = json.loads((regrade.base / "diff" / "diff.json").read_text())
    counts = report["summary"]["learners"]
    assert counts == {"gained": 0, "lost": 1, "same": 1, "only in old": 1, "only in new": 1, "not graded": 0}
    steps = {step["number"]: (step["gained"], step["lost"], step["same"]) for step in report["summary"]["steps"]}
    assert steps == {n: (0, 1, 1) if n == 3 else (0, 0, 2) for n in range(1, 9)}
    [form] = [row for row in report["learners"] if row["learner"] == FORM]
    assert form["checks"] == [{"check": _step3_check(regrade.old), "step": 3, "old": "passed", "new": "failed"}]
    assert "step 3: 0 gained, 1 lost, 1 the same" in regrade.diff.stdout


def test_grade_batch_compare_writes_the_diff_and_its_section(regrade: Regrade):
    """`grade-batch --compare OLD` writes the same diff into the new results, and a section of cohort.html."""
    written = json.loads((regrade.new / "cohort.diff" / "diff.json").read_text())
    by_hand = json.loads((regrade.base / "diff" / "diff.json").read_text())
    assert written["learners"] == by_hand["learners"]
    assert "1 lost, 1 same, 1 only in old, 1 only in new" in regrade.batch.stdout
    page = (regrade.new / "cohort.html").read_text()
    assert '<tr class="diff-learner" data-learner="merge-loose-form" data-change="lost">' in page
    assert '<tr class="diff-step" data-step="3" data-gained="0" data-lost="1" data-same="1">' in page
    cohort = json.loads((regrade.new / "cohort.json").read_text())
    assert cohort["learners"] == 2 + 1, "the cohort report is the new batch's alone"
