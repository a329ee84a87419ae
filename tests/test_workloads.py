"""The helpers that return what a check loops over: every workload kind they accept, on a real cluster (its
controllers make the Pods), a kind they do not know refused by name, and nothing found failing the check."""

from __future__ import annotations

import pytest

from pytest_gpulab.grading import GradingError, StepFailed, k8s
from pytest_gpulab.grading.live import LiveCluster
from pytest_gpulab.labs.waiting import wait_until

NAMESPACE = "tests-workloads"
TEMPLATE = """
    metadata: {labels: {app: APP}}
    spec:
      restartPolicy: RESTART
      tolerations: [{operator: Exists}]
      containers: [{name: main, image: registry.example/main:1}]
"""
TEMPLATE_ALWAYS = TEMPLATE.replace("RESTART", "Always")
WORKLOADS = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: trainer, namespace: {NAMESPACE}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: trainer}}}}
  template: {TEMPLATE_ALWAYS.replace("APP", "trainer")}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: idle, namespace: {NAMESPACE}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: idle}}}}
  template: {TEMPLATE_ALWAYS.replace("APP", "idle")}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: once, namespace: {NAMESPACE}}}
spec:
  template: {TEMPLATE.replace("APP", "once").replace("RESTART", "Never")}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: store, namespace: {NAMESPACE}}}
spec:
  replicas: 2
  serviceName: store
  selector: {{matchLabels: {{app: store}}}}
  template: {TEMPLATE_ALWAYS.replace("APP", "store")}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {NAMESPACE}}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template: {TEMPLATE_ALWAYS.replace("APP", "agent")}
---
apiVersion: v1
kind: Pod
metadata: {{name: trainer-lookalike, namespace: {NAMESPACE}, labels: {{app: trainer}}}}
spec:
  containers: [{{name: main, image: registry.example/main:1}}]
"""
MADE = {"Deployment/trainer": 2, "Job/once": 1, "StatefulSet/store": 2, "DaemonSet/agent": 3}


@pytest.fixture(scope="module")
def live(gpuop_cluster) -> LiveCluster:
    gpuop_cluster.kubectl("create", "namespace", NAMESPACE)  # first: its objects are refused until it is there
    gpuop_cluster.kubectl("wait", "--for=jsonpath={.status.phase}=Active", f"namespace/{NAMESPACE}")
    gpuop_cluster.kubectl("apply", "-f", "-", input=WORKLOADS)
    return LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))


def workload(live: LiveCluster, which: str) -> dict:
    kind, name = which.split("/")
    found = live.get(kind, f"{NAMESPACE}/{name}")
    assert found is not None, which
    return found


@pytest.mark.parametrize("which", sorted(MADE))
def test_a_workload_s_pods_are_found_through_its_controller(live, which):
    made = workload(live, which)
    pods = wait_until(lambda: len(got := k8s.pods_of(live, made, allow_empty=True)) >= MADE[which] and got, 60)
    assert pods, f"{which}: its controller made no Pods in 60 s"
    assert len(pods) == MADE[which], [k8s.name_of(pod) for pod in pods]
    assert "trainer-lookalike" not in {k8s.name_of(pod) for pod in pods}  # labels alike, owned by nobody


def test_a_deployment_s_pods_are_its_replicasets_not_the_deployment_s(live):
    pods = wait_until(lambda: k8s.pods_of(live, workload(live, "Deployment/trainer"), allow_empty=True), 60)
    owners = {ref["kind"] for pod in pods for ref in pod["metadata"]["ownerReferences"]}
    assert owners == {"ReplicaSet"}


def test_no_pods_fail_the_check_with_a_sentence_unless_empty_is_right(live):
    idle = workload(live, "Deployment/idle")
    with pytest.raises(StepFailed, match=f"Deployment {NAMESPACE}/idle has no Pods in the cluster") as failed:
        k8s.pods_of(live, idle)
    assert not isinstance(failed.value, GradingError)
    assert k8s.pods_of(live, idle, allow_empty=True) == []


@pytest.mark.parametrize(
    ("helper", "kind"),
    [(k8s.pods_of, "CronJob"), (k8s.pods_of, "ConfigMap"), (k8s.revisions_of, "Deployment"), (k8s.revisions_of, None)],
)
def test_a_kind_a_helper_cannot_pair_is_refused_by_name(live, helper, kind):
    obj = {"kind": kind, "metadata": {"name": "x", "namespace": NAMESPACE, "uid": "u"}} if kind else {}
    with pytest.raises(GradingError, match=f"a {kind or 'kindless object'}, a kind it cannot pair"):
        helper(live, obj)


@pytest.mark.parametrize("which", ["StatefulSet/store", "DaemonSet/agent"])
def test_revisions_of_a_statefulset_and_a_daemonset(live, which):
    assert wait_until(lambda: k8s.revisions_of(live, workload(live, which), allow_empty=True), 60)


def test_nodes_and_coverage_that_find_nothing_fail_unless_empty_is_right(live):
    with pytest.raises(StepFailed, match=r"None of the lab's nodes \(no-such-node\) is in the cluster"):
        k8s.lab_nodes(live, ["no-such-node"])
    assert k8s.lab_nodes(live, ["no-such-node"], allow_empty=True) == []
    assert [k8s.name_of(node) for node in k8s.lab_nodes(live, ["lab-node-1"])] == ["lab-node-1"]
    with pytest.raises(StepFailed, match="The namespace default has no DaemonSet in the cluster"):
        k8s.coverage_gaps(live, "default")
    assert k8s.coverage_gaps(live, "default", allow_empty=True) == set()
