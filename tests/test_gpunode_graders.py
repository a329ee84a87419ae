"""The gpunode graders, proven against the reference solution on real lab clusters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grading
import pytest
from gpunode_variants import FORMS, TRAPS, Variant

from pytest_gpulab.kwok import KwokCluster

LAB = "gpunode"
# Step 5 as a learner who writes the status into the manifest and never patches it.
POOL_WITH_STATUS = """apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
status:
  machineCount: 3
  readyMachineCount: 2
  updatedMachineCount: 2
  conditions:
    - {type: Updated, status: "False", lastTransitionTime: "2024-10-29T09:00:00Z"}
    - {type: Updating, status: "True", lastTransitionTime: "2024-10-29T09:00:00Z"}
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Iterator[tuple[KwokCluster, Path]]:
    """A lab cluster and a root on which the reference solution ran every step."""
    root = tmp_path_factory.mktemp("reference-root")
    with KwokCluster.for_lab(LAB, name="tests-gpunode") as cluster:
        grading.solve(LAB, cluster, root)
        yield cluster, root


def test_reference_solution_passes_every_step(pytester, reference):
    cluster, root = reference
    grading.assert_reference_passes(pytester, LAB, root, cluster)


@pytest.mark.parametrize("variant", TRAPS, ids=lambda v: v.name)
def test_trap_fails_exactly_its_step_with_its_hint(pytester, reference, tmp_path, variant: Variant):
    grading.assert_trap_fails_its_step(pytester, LAB, reference, tmp_path, variant)


@pytest.mark.parametrize("variant", FORMS, ids=lambda v: v.name)
def test_form_variant_passes(pytester, reference, tmp_path, variant: Variant):
    grading.assert_form_passes(pytester, LAB, reference, tmp_path, variant)


def test_start_fails_every_step_then_status_at_create_time_fails_step_5(pytester, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with KwokCluster.for_lab(LAB, name="tests-gpunode-start") as cluster:
        grading.assert_untouched_start_fails_every_step_cleanly(pytester, LAB, root, cluster)

        grading.solve(LAB, cluster, root, 1, 2, 3, 4)
        grading.solve(LAB, cluster, root, 5)  # the files; the pool is then made again without the patch
        cluster.kubectl("delete", "machineconfigpool", "worker", "--wait=true")
        (root / "k8s/mcp-worker.yaml").write_text(POOL_WITH_STATUS)
        cluster.kubectl("apply", "-f", str(root / "k8s/mcp-worker.yaml"))
        grading.solve(LAB, cluster, root, 6, 7, 8)
        (root / "out/preflight.txt").write_text("BLOCKED=mcp/worker\nBLOCKED=taint/lab-node-2/ai4dd-a100-reserved\n")

        failures = grading.failing(grading.grade(pytester, LAB, root, cluster))
    assert set(failures) == {5, 6}, failures
    assert "dropped at create time" in failures[5] and "--subresource=status" in failures[5]
    assert failures[6].startswith(
        "Blocked by step 5: An Updating status on the pool worker, which step 5 sets, is missing."
    )
    assert "Because step 5 failed: " in failures[6] and "dropped at create time" in failures[6]
