"""KwokCluster itself: start, stop, and failures that say what to do."""

import socket
from pathlib import Path

import pytest
from grading import WIDGET_CRD
from processes import processes_mentioning, running_commands

from pytest_gpulab.cluster import ports
from pytest_gpulab.cluster.copy import CopyAhead, add_objects, copy_with
from pytest_gpulab.cluster.kwok import KwokCluster, KwokClusterError
from pytest_gpulab.cluster.kwokctl import port_is_free
from pytest_gpulab.labs.waiting import wait_until


def test_missing_binaries_say_what_to_run(tmp_path):
    with pytest.raises(KwokClusterError, match=r"missing lab cluster binaries in .*kwokctl.*gpulab build"):
        KwokCluster.for_lab("gpuop", bin_dir=tmp_path).start()


def test_cluster_stops_its_processes_and_deletes_its_state(tmp_path):
    workdir = tmp_path / "kwok"
    with KwokCluster.for_lab("gpuop", name="tests-cleanup", workdir=workdir) as cluster:
        assert cluster.kubeconfig.exists()
        assert processes_mentioning(str(workdir))
    assert not (workdir / "clusters" / "tests-cleanup").exists()
    assert wait_until(lambda: not processes_mentioning(str(workdir)), 60), processes_mentioning(str(workdir))


def test_port_clash_names_the_port_and_what_to_run(tmp_path):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(KwokClusterError, match=rf"port {port} is already in use.*gpulab down"):
            KwokCluster.for_lab("gpuop", name="tests-clash", apiserver_port=port, workdir=tmp_path / "kwok").start()
    assert not processes_mentioning(str(tmp_path / "kwok"))


class NodesNeverRegister(KwokCluster):
    """A cluster whose nodes never appear, as when the kwok controller cannot keep up."""

    def create_nodes(self, nodes):
        pass


def test_start_that_times_out_says_so_and_leaves_nothing_running(tmp_path):
    workdir = tmp_path / "kwok"
    cluster = NodesNeverRegister("tests-timeout", KwokCluster.for_lab("gpuop").nodes, workdir=workdir, ready_timeout=2)
    with pytest.raises(KwokClusterError, match=r"did not (answer /readyz|become ready) within 2s"):
        cluster.start()
    assert wait_until(lambda: not processes_mentioning(str(workdir)), 60), processes_mentioning(str(workdir))


def test_stopping_without_kwokctl_says_what_to_run(tmp_path):
    cluster = KwokCluster("tests-nobinaries", bin_dir=tmp_path / "bin", workdir=tmp_path / "kwok")
    cluster.cluster_dir.mkdir(parents=True)
    with pytest.raises(KwokClusterError, match=r"kwokctl is not in .*gpulab build"):
        cluster.stop()


def test_a_grading_cluster_runs_etcd_and_the_api_server_alone_short_lived_and_without_webhooks(gpuop_cluster, tmp_path):
    """A bundle's cluster: no controller acts on the frozen state, no webhook is called, and its Go programs,
    which live seconds, collect garbage only past 512 MiB."""
    from pytest_gpulab.cluster import snapshot

    snapshot.save(gpuop_cluster, tmp_path / "etcd.db")
    with snapshot.grading_cluster(tmp_path / "etcd.db", name="tests-grading-cluster") as cluster:
        mine = {pid: command for pid, command in running_commands().items() if str(cluster.cluster_dir) in command}
        names = sorted(Path(command.split()[0]).name for command in mine.values() if "kwokctl" not in command)
        assert names == ["etcd", "kube-apiserver"], names
        for pid in mine:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert {b"GOGC=off", b"GOMEMLIMIT=512MiB"} <= set(environment), mine[pid]
        apiserver = next(command for command in mine.values() if "kube-apiserver" in command.split()[0])
        assert "--disable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook" in apiserver.split()


def test_a_later_cluster_on_the_same_port_is_not_read_with_an_earlier_one_s_kinds(tmp_path):
    """kubectl caches discovery by host:port. A cluster started on a port an earlier one used must not be
    read with that one's kinds: a near miss whose kind it does not serve is left out, not an error."""
    held = ports.reserve(tmp_path / "held")  # a block of ports no other cluster takes, above the ephemeral range
    port = held.start
    widget = {"apiVersion": "tests.gpulab.example/v1", "kind": "Widget", "metadata": {"name": "w"}}
    with KwokCluster.for_lab("gpuop", name="tests-port-a", apiserver_port=port, workdir=tmp_path / "a") as first:
        first.kubectl("apply", "-f", "-", input=WIDGET_CRD)
        first.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.tests.gpulab.example")
        assert add_objects(first, [widget]) == []
    assert wait_until(lambda: port_is_free(port), 60), f"port {port} still taken after the first cluster stopped"
    with KwokCluster.for_lab("gpuop", name="tests-port-b", apiserver_port=port, workdir=tmp_path / "b") as second:
        assert add_objects(second, [widget]) == ["Widget/w"]
    held.release()


def test_a_copy_holds_the_near_misses_with_their_status_and_leaves_out_what_it_cannot_hold(gpuop_cluster, tmp_path):
    """Each near miss created, then its status set as written; a Pod without a namespace goes to default, as
    kubectl places it; one whose namespace is not made, and a kind not served, are left out; the source is
    unchanged."""
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "near-node", "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]},
    }  # fmt: skip
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "near-pod"},
           "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]}, "status": {"phase": "Running"}}  # fmt: skip
    elsewhere = {**pod, "metadata": {"name": "lost", "namespace": "not-made"}}
    widget = {"apiVersion": "tests.gpulab.example/v1", "kind": "Widget", "metadata": {"name": "w"}}
    with copy_with(gpuop_cluster.kubeconfig, [node, pod, elsewhere, widget], tmp_path) as copy:
        assert copy.get_json("node", "near-node")["status"]["conditions"][0]["reason"] == "KubeletNotReady"
        assert copy.get_json("pod", "near-pod", "-n", "default")["status"]["phase"] == "Running"
        left = add_objects(copy, [elsewhere, widget])
        assert left == ["Pod/lost", "Widget/w"]
    assert gpuop_cluster.kubectl("get", "node", "near-node", check=False).returncode != 0


def test_a_copy_begun_ahead_is_there_when_asked_for_and_gone_when_closed(gpuop_cluster, tmp_path):
    """The near-miss copy a grading begins beside its first checks: the same copy when asked for, stopped at
    close; a kubeconfig no lab cluster owns is the asker's error, raised when it asks."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ahead-node"}}
    ahead = CopyAhead(gpuop_cluster.kubeconfig, [node], tmp_path / "copy")
    copy = ahead.result()
    assert copy.is_running() and copy.get_json("node", "ahead-node")["metadata"]["name"] == "ahead-node"
    ahead.close()
    assert not copy.is_running()
    stray = tmp_path / "elsewhere" / "kubeconfig.yaml"
    stray.parent.mkdir()
    stray.write_text(gpuop_cluster.kubeconfig.read_text())
    wrong = CopyAhead(stray, [node], tmp_path / "wrong")
    with pytest.raises(KwokClusterError, match=r"no kwok\.yaml"):
        wrong.result()
    wrong.close()
