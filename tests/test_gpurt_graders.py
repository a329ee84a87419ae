"""The gpurt graders on real lab clusters: what ``gpulab selftest gpurt`` does not cover.

Moved to ``gpulab selftest gpurt`` (tests/test_selftest.py), whose rows are declared in
graders/gpurt/variants.toml: the reference passes every step (its row ``reference``), each trap fails
exactly its step with its hint and each form passes (tests/gpurt_variants.py's, a ``[[trap]]`` or
``[[form]]`` each; the jq form ``requires = ["jq"]``), and the untouched start fails every step cleanly
(its row ``untouched start``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grading
import pytest

from pytest_gpulab.cluster.kwok import KwokCluster

LAB = "gpurt"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Iterator[tuple[KwokCluster, Path]]:
    """A lab cluster and a root on which the reference solution ran every step."""
    root = tmp_path_factory.mktemp("reference-root")
    with KwokCluster.for_lab(LAB, name="tests-gpurt") as cluster:
        grading.solve(LAB, cluster, root)
        yield cluster, root


def test_random_choices_replay_from_the_seed(pytester, reference):
    """The crosscheck's random subsets are the same for the same seed, and the seed is in the report."""
    cluster, root = reference
    runs = [grading.json_report(pytester, LAB, root, cluster, "--lab-seed=4242", "-k", "missing") for _ in range(2)]
    assert [run["gpulab"]["seed"] for run in runs] == [4242, 4242]
    assert all(test["outcome"] == "passed" for run in runs for test in run["tests"])
