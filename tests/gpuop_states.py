"""Lab cluster states of gpuop that the tests grade: the learner's cluster mistakes, made for real."""

from __future__ import annotations

from pathlib import Path

import grading

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs.waiting import wait_until


def solve(cluster: KwokCluster, root: Path, *steps: int) -> None:
    grading.solve("gpuop", cluster, root, *steps)


def make_steps_6_and_8_mistakes(cluster: KwokCluster, root: Path) -> None:
    """Every step right but 6 and 8, whose mistakes are in the cluster: step 6 a plain patch of the node
    status (the status subresource ignores it), step 8 the new DaemonSet spec pushed before the Pods were Ready (common mistake 3)."""
    solve(cluster, root, 1, 2, 3, 4, 5)
    cluster.kubectl(
        "patch",
        "node",
        "lab-node-0",
        "--type=merge",
        "-p",
        '{"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4"}}}',
    )
    (root / "out/node-gpu.txt").write_text("NAME GPU\nlab-node-0 4\nlab-node-1 <none>\nlab-node-2 <none>\n")
    solve(cluster, root, 7)
    # kwok marks Pods Ready within a moment, too fast to race; Pods that can never become
    # Ready give the same situation: the new spec pushed while none of the old Pods was Ready.
    cluster.kubectl("apply", "-f", "-", input=toolkit_ds("v1.16.2", "64Gi"))
    cluster.kubectl("apply", "-f", "-", input=toolkit_ds("v1.17.0", "64Gi"))
    (root / "k8s/toolkit-ds.yaml").write_text(toolkit_ds("v1.17.0", "64Gi"))
    (root / "out/rollout.txt").write_text(
        "DESIRED=3\nUPDATED=3\nREADY=0\nOLD_IMAGE_PODS=0\nMAX_UNAVAILABLE=1\nBLOCKER=insufficient-memory\n"
    )
    assert wait_until(lambda: ds_numbers(cluster) == (3, 3, 0), 60), ds_numbers(cluster)


def ds_numbers(cluster: KwokCluster) -> tuple:
    status = cluster.get_json("ds", "nvidia-container-toolkit", "-n", "gpu-operator").get("status", {})
    return status.get("desiredNumberScheduled"), status.get("updatedNumberScheduled", 0), status.get("numberReady", 0)


def toolkit_ds(tag: str, memory: str) -> str:
    return f"""
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: nvidia-container-toolkit, namespace: gpu-operator}}
spec:
  selector: {{matchLabels: {{app: nvidia-container-toolkit}}}}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1}}}}
  template:
    metadata: {{labels: {{app: nvidia-container-toolkit}}}}
    spec:
      containers:
      - name: toolkit
        image: nvcr.io/nvidia/k8s/container-toolkit:{tag}
        resources: {{requests: {{memory: {memory}}}}}
"""
