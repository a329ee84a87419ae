"""The gpuop graders, proven against the reference solution on real lab clusters."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import grading
import pytest
from gpuop_causes import CAUSES
from gpuop_states import ds_numbers, make_steps_6_and_8_mistakes, toolkit_ds
from gpuop_traps import TRAPS
from gpuop_variants import FORMS, Variant
from grading import StepResult, failing

from pytest_gpulab.kwok import KwokCluster
from pytest_gpulab.waiting import wait_until

LAB = "gpuop"


def grade(pytester: pytest.Pytester, root: Path, cluster: KwokCluster, *args: str) -> dict[int, StepResult]:
    return grading.grade(pytester, LAB, root, cluster, *args)


def solve(cluster: KwokCluster, root: Path, *steps: int) -> None:
    grading.solve(LAB, cluster, root, *steps)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Iterator[tuple[KwokCluster, Path]]:
    """A lab cluster and a root on which the reference solution ran every step."""
    root = tmp_path_factory.mktemp("reference-root")
    with KwokCluster.for_lab("gpuop", name="tests-reference") as cluster:
        solve(cluster, root)
        yield cluster, root


def test_reference_solution_passes_every_step(pytester, reference):
    cluster, root = reference
    grading.assert_reference_passes(pytester, LAB, root, cluster)


@pytest.mark.parametrize("variant", TRAPS + CAUSES, ids=lambda v: v.name)
def test_trap_fails_exactly_its_step_with_its_hint(pytester, reference, tmp_path, variant: Variant):
    grading.assert_trap_fails_its_step(pytester, LAB, reference, tmp_path, variant)


@pytest.mark.parametrize("variant", FORMS, ids=lambda v: v.name)
def test_form_variant_passes(pytester, reference, tmp_path, variant: Variant):
    grading.assert_form_passes(pytester, LAB, reference, tmp_path, variant)


def test_start_state_fails_every_step_then_cluster_mistakes_fail_their_steps(pytester, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with KwokCluster.for_lab("gpuop", name="tests-mistakes") as cluster:
        grading.assert_untouched_start_fails_every_step_cleanly(pytester, LAB, root, cluster)

        make_steps_6_and_8_mistakes(cluster, root)

        failures = failing(grade(pytester, root, cluster))
        assert set(failures) == {6, 8}, failures
        assert "--subresource=status" in failures[6]
        assert "Common mistake 3" in failures[8]


REFUSED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: cuda-probe, namespace: gpu-lab}
spec:
  runtimeClassName: nvidia
  containers:
  - name: cuda
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}, requests: {nvidia.com/gpu: 2}}
"""


def settled(cluster: KwokCluster, numbers: tuple, images: set[str]) -> bool:
    pods = cluster.get_json("pods", "-n", "gpu-operator", "-l", "app=nvidia-container-toolkit")["items"]
    return (
        ds_numbers(cluster) == numbers
        and {p["spec"]["containers"][0]["image"].rsplit(":", 1)[1] for p in pods} == images
    )


def test_cluster_mistakes_name_their_cause(pytester, tmp_path):
    """A Pod the API server refused, and a DaemonSet changed in two edits, each named for what happened."""
    root = tmp_path / "root"
    root.mkdir()
    with KwokCluster.for_lab("gpuop", name="tests-causes") as cluster:
        solve(cluster, root, 1, 2, 3, 4, 5)
        cluster.kubectl("delete", "pod", "cuda-probe", "-n", "gpu-lab", "--wait=true")
        (root / "k8s/gpu-pod.yaml").write_text(REFUSED_POD)  # the learner's apply of this failed
        assert cluster.kubectl("apply", "-f", str(root / "k8s/gpu-pod.yaml"), check=False).returncode != 0

        cluster.kubectl("create", "namespace", "gpu-operator")
        for tag, memory, numbers, images in (
            ("v1.16.2", "128Mi", (3, 3, 3), {"v1.16.2"}),
            ("v1.17.0", "128Mi", (3, 3, 3), {"v1.17.0"}),  # the first of two edits rolls out everywhere
            ("v1.17.0", "64Gi", (3, 1, 2), {"v1.17.0"}),
        ):
            cluster.kubectl("apply", "-f", "-", input=toolkit_ds(tag, memory))
            assert wait_until(partial(settled, cluster, numbers, images), 90), ds_numbers(cluster)
        (root / "k8s/toolkit-ds.yaml").write_text(toolkit_ds("v1.17.0", "64Gi"))

        failures = failing(grade(pytester, root, cluster))
    assert (
        "the API server refuses k8s/gpu-pod.yaml" in failures[5]
        and "must be equal to nvidia.com/gpu limit" in failures[5]
    )
    assert "changed in two edits" in failures[8] and "in one edit" in failures[8]
