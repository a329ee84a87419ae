"""Grading reads by name and selector: its requests, and the bytes that come back, stay the same when
the cluster around the lab grows by hundreds of nodes and thousands of Pods (pytest_gpulab.cluster.crowd)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grading import json_report, solve

from pytest_gpulab.cluster.crowd import add_crowd
from pytest_gpulab.cluster.kwok import KwokCluster

EXTRA_NODES, EXTRA_PODS = 100, 1000
# A grader that lists every node reads some 2 KB more per node (every Pod, 1.5 KB): 200 KB here, as much
# as a whole grading's bytes or more. What may differ is a resourceVersion's length or a timestamp.
BYTES_SLACK = 1.1

# gpunode's preflight gate blocks on any custom taint, so its crowd is untainted (its DaemonSets
# select GPU labels); the other labs' Pods and DaemonSets would land on untainted crowd nodes.
TAINTED = {"gpuop": True, "gpurt": True, "gpunode": False}


def grading(pytester: pytest.Pytester, lab: str, root: Path, cluster: KwokCluster) -> dict:
    data = json_report(pytester, lab, root, cluster, f"--gpulab-report={pytester.path / 'grading.json'}")
    grading = json.loads((pytester.path / "grading.json").read_text())
    assert data["gpulab"]["complete"] and grading["earned"] == grading["possible"], [
        (step["number"], step["message"]) for step in grading["steps"] if step["outcome"] != "passed"
    ]
    return grading["cluster_reads"]


@pytest.mark.parametrize("lab", sorted(TAINTED))
def test_a_gradings_reads_do_not_grow_with_the_cluster(pytester, tmp_path, lab):
    with KwokCluster.for_lab(lab, name=f"tests-scale-{lab}", workdir=tmp_path / "kwok") as cluster:
        root = tmp_path / "root"
        root.mkdir()
        solve(lab, cluster, root)
        small = grading(pytester, lab, root, cluster)
        add_crowd(cluster, EXTRA_NODES, EXTRA_PODS, taint=TAINTED[lab])
        crowded = grading(pytester, lab, root, cluster)
    assert crowded["requests"] == small["requests"], (small, crowded)
    assert crowded["bytes"] <= small["bytes"] * BYTES_SLACK, (small, crowded)
