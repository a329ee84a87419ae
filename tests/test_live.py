"""LiveCluster: read-only, and a cluster that stops answering fails the step with a sentence."""

import threading
from collections.abc import Callable
from typing import Any

import pytest
from grading import WIDGET_CRD

from pytest_gpulab.grading.feedback import GradingError
from pytest_gpulab.grading.live import LiveCluster
from pytest_gpulab.grading.parsing import dig

LONG = 600  # a wait's timeout (and quiet time) that no test waits out: a wait that ended ended for another reason
BOUND = 60  # how long a test waits for a waiting thread to end: generous on a loaded machine


def name_of(obj: dict | None) -> str | None:
    return (obj or {}).get("metadata", {}).get("name")


def ended(call: Callable[[], Any]) -> Any:
    """What ``call`` returned, once it ended (it runs in a thread, waited for at most BOUND s)."""
    answer: dict[str, Any] = {}

    def target() -> None:
        try:
            answer["value"] = call()
        except BaseException as error:
            answer["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), f"still waiting after {BOUND} s"
    if "error" in answer:
        raise answer["error"]
    return answer["value"]


def test_reads_objects_and_says_none_for_a_missing_one(gpuop_cluster):
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    assert live.probe().startswith("v1.36.")
    assert name_of(live.get("Node", "lab-node-0")) == "lab-node-0"
    assert name_of(live.get_path("/api/v1/nodes/lab-node-0")) == "lab-node-0"
    assert live.get("Node", "no-such-node") is None
    assert {n["metadata"]["name"] for n in live.list("Node", labels={"kubernetes.io/hostname": "lab-node-1"})} == {
        "lab-node-1"
    }
    assert (live.get("ServiceAccount", "default/default") or {}).get("metadata", {}).get("namespace") == "default"
    assert live.get("serviceaccounts", "default", namespace="default") is not None
    assert not [name for name in dir(live) if name.startswith(("create", "patch", "delete", "put", "post", "replace"))]


def test_a_cluster_that_stopped_answering_is_a_grading_error(tmp_path):
    from pytest_gpulab.cluster.kwok import KwokCluster

    with KwokCluster.for_lab("gpuop", name="tests-vanishing", workdir=tmp_path / "kwok") as cluster:
        live = LiveCluster.from_kubeconfig(str(cluster.kubeconfig))
        live.probe()
    with pytest.raises(
        GradingError,
        match=r"The lab cluster at \S+ \(kubeconfig \S+\) did not answer \(.+\) when the grader read /api/v1/nodes/lab-node-0",
    ):
        live.get("Node", "lab-node-0")


def test_a_custom_resource_is_found_through_discovery(gpuop_cluster):
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    assert live.get("Widget", "first") is None  # the kind does not exist yet: not in the cluster
    gpuop_cluster.kubectl("apply", "-f", "-", input=WIDGET_CRD)
    gpuop_cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.tests.gpulab.example")
    gpuop_cluster.kubectl(
        "apply", "-f", "-", input="apiVersion: tests.gpulab.example/v1\nkind: Widget\nmetadata: {name: first}\n"
    )
    for kind in ("Widget", "widgets", "widgets.tests.gpulab.example"):
        assert (live.get(kind, "first") or {}).get("kind") == "Widget", kind


def test_a_dry_run_names_the_refusal_and_creates_nothing(gpuop_cluster):
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    bad = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "Not_A_Name", "namespace": "default"},
        "data": {"any": "x"},
    }
    assert "Not_A_Name" in (live.refusal(bad) or "")
    good = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dry-run-only", "namespace": "default"},
        "data": {"any": "x"},
    }
    assert live.refusal(good) is None
    assert live.get("ConfigMap", "default/dry-run-only") is None, "a dry run must persist nothing"
    missing_namespace = {**good, "metadata": {"name": "x", "namespace": "no-such-namespace"}}
    assert "no-such-namespace" in (live.refusal(missing_namespace) or "")
    assert "serves no kind" in (live.refusal({"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "x"}}) or "")


def test_only_reads_and_dry_runs_are_ever_sent(gpuop_cluster):
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    with pytest.raises(PermissionError):
        live._request(
            "/api/v1/namespaces/default/configmaps",
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        )
    assert live.get("ConfigMap", "default/x") is None


def test_a_wait_answers_as_soon_as_the_object_changes(gpuop_cluster):
    """Its timeout and quiet time are far off: the wait ends because the object changed, on the watch's event."""
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    name = "tests-wait-for-change"
    gpuop_cluster.kubectl("create", "configmap", name, "--from-literal=step=1")
    waited: dict = {}

    def wait() -> None:
        waited["object"] = live.wait_for(
            "ConfigMap", f"default/{name}", lambda c: dig(c, "data", "step") == "2", LONG, quiet=LONG
        )

    try:
        waiter = threading.Thread(target=wait, daemon=True)
        reads_before = live.reads
        waiter.start()
        gpuop_cluster.kubectl("patch", "configmap", name, "-p", '{"data":{"step":"2"}}')
        waiter.join(BOUND)
    finally:
        gpuop_cluster.kubectl("delete", "configmap", name)
    assert not waiter.is_alive(), f"the wait did not end on the change (still waiting after {BOUND} s)"
    assert dig(waited["object"], "data", "step") == "2"
    assert live.reads - reads_before <= 2  # one read, one watch: no polling


def test_a_wait_on_an_object_at_rest_ends_after_the_quiet_time(gpuop_cluster):
    """Its timeout is far off: the wait on an object at rest ends after it watched it through the quiet time.
    A wait on an object that does not exist is one read, no watch."""
    live = LiveCluster.from_kubeconfig(str(gpuop_cluster.kubeconfig))
    reads_before = live.reads
    at_rest = ended(
        lambda: live.wait_for(
            "ConfigMap", "default/kube-root-ca.crt", lambda c: dig(c, "data", "never") == "set", LONG, quiet=1
        )
    )
    assert dig(at_rest, "metadata", "name") == "kube-root-ca.crt"
    assert live.reads - reads_before == 2  # one read, one watch: it watched the quiet time out, then ended
    reads_before = live.reads
    assert ended(lambda: live.wait_for("Pod", "default/never-created", lambda p: p is not None, LONG, quiet=10)) is None
    assert live.reads - reads_before == 1  # only the learner makes a named object appear: no wait, no watch


RECORDER = """
import sys, threading

def pytest_runtest_setup(item):
    importing = [t.name for t in threading.enumerate() if "import" in t.name]
    with open("setups.txt", "a") as out:
        out.write(f"{item.name} {'kubernetes.client' in sys.modules} {importing}\\n")
"""


def test_the_client_is_imported_before_the_first_check_starts(pytester, gpuop_cluster, monkeypatch):
    """pytest's log capture walks the logging module's loggers without its lock as each check starts; an import
    of the client (which adds loggers) running beside a check once failed it with "dictionary changed size
    during iteration". So the client is imported before the first check, never beside one."""
    from grading import json_report

    pytester.makepyfile(gpulab_setup_recorder=RECORDER)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    root = pytester.mkdir("root")
    json_report(pytester, "gpuop", root, gpuop_cluster, "-p", "gpulab_setup_recorder")
    setups = (pytester.path / "setups.txt").read_text().splitlines()
    assert setups and all(line.endswith(" True []") for line in setups), setups
