"""The cluster behaviours the labs rely on, reproduced on a real kwok lab cluster."""

import json

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs.labfile import NodeSpec
from pytest_gpulab.labs.waiting import wait_until


def apply(cluster: KwokCluster, manifest: str) -> None:
    cluster.kubectl("apply", "-f", "-", input=manifest)


def pod_scheduled(cluster: KwokCluster, namespace: str, name: str) -> dict | None:
    pod = cluster.get_json("pod", name, "-n", namespace)
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)


def wait_for_condition(cluster, namespace, name, status, timeout=60):
    condition = wait_until(
        lambda: (c := pod_scheduled(cluster, namespace, name)) and c["status"] == status and c, timeout
    )
    assert condition, (
        f"PodScheduled of {namespace}/{name} never became {status}: {pod_scheduled(cluster, namespace, name)}"
    )
    return condition


def test_lab_cluster_matches_the_lab_topology(gpuop_cluster):
    nodes = {n["metadata"]["name"]: n for n in gpuop_cluster.get_json("nodes")["items"]}
    assert sorted(nodes) == ["lab-node-0", "lab-node-1", "lab-node-2"]
    for node in nodes.values():
        assert node["status"]["capacity"]["cpu"] == "8"
        assert node["status"]["capacity"]["memory"] == "32Gi"
        assert node["status"]["allocatable"]["pods"] == "110"
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert not node["spec"].get("taints")
    version = json.loads(gpuop_cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.36.")
    assert version["clientVersion"]["gitVersion"] == version["serverVersion"]["gitVersion"]


GPU_POD = """
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
---
apiVersion: v1
kind: Namespace
metadata: {name: behaviour-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: cuda-probe, namespace: behaviour-gpu}
spec:
  runtimeClassName: nvidia
  containers:
  - name: cuda
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_gpu_pod_waits_for_advertised_gpus_then_runs(fresh_cluster):
    apply(fresh_cluster, GPU_POD)
    condition = wait_for_condition(fresh_cluster, "behaviour-gpu", "cuda-probe", "False")
    assert condition["reason"] == "Unschedulable"
    assert "0/3 nodes are available" in condition["message"]
    assert "Insufficient nvidia.com/gpu" in condition["message"]

    fresh_cluster.kubectl(
        "patch",
        "node",
        "lab-node-0",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4"}}}',
    )
    fresh_cluster.kubectl(
        "wait", "pod/cuda-probe", "-n", "behaviour-gpu", "--for=jsonpath={.status.phase}=Running", "--timeout=60s"
    )
    pod = fresh_cluster.get_json("pod", "cuda-probe", "-n", "behaviour-gpu")
    assert pod["spec"]["nodeName"] == "lab-node-0"
    node = fresh_cluster.get_json("node", "lab-node-0")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"


OVERHEAD = """
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia-overhead}
handler: nvidia
overhead:
  podFixed: {cpu: 250m, memory: 128Mi}
---
apiVersion: v1
kind: Namespace
metadata: {name: behaviour-overhead}
---
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: behaviour-overhead}
spec:
  nodeSelector: {kubernetes.io/hostname: gpu-tight-a}
  containers:
  - {name: app, image: busybox, resources: {requests: {cpu: 900m}}}
---
apiVersion: v1
kind: Pod
metadata: {name: over, namespace: behaviour-overhead}
spec:
  runtimeClassName: nvidia-overhead
  nodeSelector: {kubernetes.io/hostname: gpu-tight-b}
  containers:
  - {name: app, image: busybox, resources: {requests: {cpu: 900m}}}
"""


def test_runtimeclass_overhead_is_added_and_counted_by_the_scheduler(fresh_cluster):
    fresh_cluster.create_nodes([NodeSpec("gpu-tight-a", cpu="1"), NodeSpec("gpu-tight-b", cpu="1")])
    apply(fresh_cluster, OVERHEAD)
    over = fresh_cluster.get_json("pod", "over", "-n", "behaviour-overhead")
    assert over["spec"]["overhead"] == {"cpu": "250m", "memory": "128Mi"}
    fresh_cluster.kubectl(
        "wait", "pod/fits", "-n", "behaviour-overhead", "--for=jsonpath={.status.phase}=Running", "--timeout=60s"
    )
    assert fresh_cluster.get_json("pod", "fits", "-n", "behaviour-overhead")["spec"]["nodeName"] == "gpu-tight-a"
    condition = wait_for_condition(fresh_cluster, "behaviour-overhead", "over", "False")
    assert "Insufficient cpu" in condition["message"]
    assert fresh_cluster.get_json("pod", "over", "-n", "behaviour-overhead")["status"]["phase"] == "Pending"


def toolkit_ds(image: str, memory: str) -> str:
    return f"""
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: toolkit, namespace: behaviour-ds}}
spec:
  selector: {{matchLabels: {{app: toolkit}}}}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: 1}}}}
  template:
    metadata: {{labels: {{app: toolkit}}}}
    spec:
      containers:
      - name: toolkit
        image: {image}
        resources: {{requests: {{memory: {memory}}}}}
"""


def ds_status(cluster):
    status = cluster.get_json("ds", "toolkit", "-n", "behaviour-ds").get("status", {})
    return status.get("desiredNumberScheduled"), status.get("updatedNumberScheduled", 0), status.get("numberReady", 0)


def test_daemonset_rollout_stalls_on_a_request_no_node_fits(gpuop_cluster):
    gpuop_cluster.kubectl("create", "namespace", "behaviour-ds")
    apply(gpuop_cluster, toolkit_ds("nvcr.io/nvidia/k8s/container-toolkit:v1.16.2", "128Mi"))
    assert wait_until(lambda: ds_status(gpuop_cluster) == (3, 3, 3), 60), ds_status(gpuop_cluster)

    apply(gpuop_cluster, toolkit_ds("nvcr.io/nvidia/k8s/container-toolkit:v1.17.0", "64Gi"))

    def stalled():
        pods = gpuop_cluster.get_json("pods", "-n", "behaviour-ds")["items"]
        pending = [
            p
            for p in pods
            if p["status"].get("phase") == "Pending"
            and any("Insufficient memory" in (c.get("message") or "") for c in p["status"].get("conditions", []))
        ]
        old = [p for p in pods if p["spec"]["containers"][0]["image"].endswith(":v1.16.2")]
        return ds_status(gpuop_cluster) == (3, 1, 2) and len(pending) == 1 and len(old) == 2

    assert wait_until(stalled, 60), (
        ds_status(gpuop_cluster),
        gpuop_cluster.kubectl("get", "pods", "-n", "behaviour-ds", "-o", "wide").stdout,
    )
    # A stall is a steady state, not a moment on the way somewhere else.
    assert not wait_until(lambda: ds_status(gpuop_cluster) != (3, 1, 2), 5)


UNKNOWN_HANDLER = """
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia-typo}
handler: nvidai
---
apiVersion: v1
kind: Namespace
metadata: {name: behaviour-typo}
---
apiVersion: v1
kind: Pod
metadata: {name: probe-typo, namespace: behaviour-typo}
spec:
  runtimeClassName: nvidia-typo
  containers:
  - {name: app, image: busybox}
"""


def test_runtimeclass_with_unknown_handler_is_accepted_and_scheduled(gpuop_cluster):
    apply(gpuop_cluster, UNKNOWN_HANDLER)
    condition = wait_for_condition(gpuop_cluster, "behaviour-typo", "probe-typo", "True")
    assert condition["status"] == "True"
    assert gpuop_cluster.get_json("pod", "probe-typo", "-n", "behaviour-typo")["spec"]["nodeName"].startswith(
        "lab-node-"
    )


def tight_node(name: str, annotations: str) -> str:
    """A cpu-1 node as gpurt's step 3 has the learner write it."""
    return f"""
apiVersion: v1
kind: Node
metadata:
  name: {name}
  annotations: {annotations}
  labels: {{kubernetes.io/hostname: {name}, type: kwok}}
status:
  capacity: {{cpu: "1", memory: 4Gi, pods: "110"}}
  allocatable: {{cpu: "1", memory: 4Gi, pods: "110"}}
"""


def node_ready(cluster: KwokCluster, name: str) -> bool:
    conditions = cluster.get_json("node", name)["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def lease_names(cluster: KwokCluster) -> set[str]:
    return {lease["metadata"]["name"] for lease in cluster.get_json("leases", "-n", "kube-node-lease")["items"]}


def test_kwok_manages_only_nodes_annotated_fake():
    """gpurt's text: kwok manages only nodes with kwok.x-k8s.io/node: fake. One without stays NotReady."""
    with KwokCluster.for_lab("gpurt", name="tests-annotated") as cluster:
        apply(cluster, tight_node("gpu-tight-a", "{kwok.x-k8s.io/node: fake}") + "---" + tight_node("bare", "{}"))
        assert wait_until(lambda: node_ready(cluster, "gpu-tight-a"), 60), cluster.get_json("node", "gpu-tight-a")
        assert {"gpu-tight-a", "lab-node-0"} <= lease_names(cluster)  # kwok's heartbeat of the nodes it manages
        # kwok took the annotated node at once; the bare one it never takes: no heartbeat, no Ready.
        assert not wait_until(lambda: node_ready(cluster, "bare"), 5), cluster.get_json("node", "bare")["status"]
        assert "bare" not in lease_names(cluster)
