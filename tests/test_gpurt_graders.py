"""The gpurt graders, proven against the reference solution on real lab clusters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grading
import pytest
from gpurt_variants import FORMS, TRAPS, Variant, jq_available

from pytest_gpulab.kwok import KwokCluster

LAB = "gpurt"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Iterator[tuple[KwokCluster, Path]]:
    """A lab cluster and a root on which the reference solution ran every step."""
    root = tmp_path_factory.mktemp("reference-root")
    with KwokCluster.for_lab(LAB, name="tests-gpurt") as cluster:
        grading.solve(LAB, cluster, root)
        yield cluster, root


def test_reference_solution_passes_every_step(pytester, reference):
    cluster, root = reference
    grading.assert_reference_passes(pytester, LAB, root, cluster)


def test_random_choices_replay_from_the_seed(pytester, reference):
    """The crosscheck's random subsets are the same for the same seed, and the seed is in the report."""
    cluster, root = reference
    runs = [grading.json_report(pytester, LAB, root, cluster, "--lab-seed=4242", "-k", "missing") for _ in range(2)]
    assert [run["gpulab"]["seed"] for run in runs] == [4242, 4242]
    assert all(test["outcome"] == "passed" for run in runs for test in run["tests"])


@pytest.mark.parametrize("variant", TRAPS, ids=lambda v: v.name)
def test_trap_fails_exactly_its_step_with_its_hint(pytester, reference, tmp_path, variant: Variant):
    grading.assert_trap_fails_its_step(pytester, LAB, reference, tmp_path, variant)


@pytest.mark.parametrize("variant", FORMS, ids=lambda v: v.name)
def test_form_variant_passes(pytester, reference, tmp_path, variant: Variant):
    if "jq" in variant.name and not jq_available():
        pytest.skip("jq is not installed here")
    grading.assert_form_passes(pytester, LAB, reference, tmp_path, variant)


def test_untouched_start_fails_every_step_cleanly(pytester, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with KwokCluster.for_lab(LAB, name="tests-gpurt-start") as cluster:
        grading.assert_untouched_start_fails_every_step_cleanly(pytester, LAB, root, cluster)
