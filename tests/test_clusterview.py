"""The doctored view on a real cluster: chosen Pods gone, their DaemonSet's status consistent, writes refused."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpulab.cluster import toolchain
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.sandbox.clusterview import MAX_CONNECTIONS, DoctoredView

NS = "view-test"
DAEMONSET = f"""
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      containers: [{{name: agent, image: registry.example/agent:v1}}]
"""
BYSTANDER = f"""
apiVersion: v1
kind: Pod
metadata: {{name: bystander, namespace: {NS}}}
spec:
  containers: [{{name: main, image: registry.example/main:v1}}]
"""


@pytest.fixture(scope="module")
def scene(gpuop_cluster: KwokCluster, tmp_path_factory) -> Iterator[tuple[KwokCluster, dict, DoctoredView]]:
    """A DaemonSet on the three nodes and a plain Pod; the view hides the agent on lab-node-1."""
    gpuop_cluster.kubectl("create", "namespace", NS)
    gpuop_cluster.kubectl("apply", "-f", "-", input=DAEMONSET + "---" + BYSTANDER)
    ready = lambda: gpuop_cluster.get_json("ds", "agent", "-n", NS).get("status", {}).get("numberReady") == 3  # noqa: E731
    assert wait_until(ready, 60)
    pods = gpuop_cluster.get_json("pods", "-n", NS, "-l", "app=agent")["items"]
    hidden = next(p for p in pods if p["spec"]["nodeName"] == "lab-node-1")
    with (
        DoctoredView(
            gpuop_cluster.kubeconfig, {(NS, hidden["metadata"]["name"])}, tmp_path_factory.mktemp("view")
        ) as view,
        view.door(tcp=True) as door,
    ):
        view.test_door = door  # type: ignore[attr-defined]  # a run's door without a sandbox, for these tests
        yield gpuop_cluster, hidden, view
    gpuop_cluster.kubectl("delete", "namespace", NS, "--wait=false")


def through(view: DoctoredView, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(view.test_door.kubeconfig)}  # type: ignore[attr-defined]
    return subprocess.run(
        [str(toolchain.bin_dir() / "kubectl"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_hidden_pod_is_gone_from_every_read(scene):
    _, hidden, view = scene
    name = hidden["metadata"]["name"]
    assert name not in through(view, "get", "pods", "-n", NS, "-o", "json").stdout
    table = through(view, "get", "pods", "-A")
    assert table.returncode == 0
    assert name not in table.stdout
    assert "bystander" in table.stdout
    on_node = through(
        view, "get", "pods", "-n", NS, "-l", "app=agent", "--field-selector", "spec.nodeName=lab-node-1", "-o", "name"
    )
    assert on_node.returncode == 0
    assert on_node.stdout.strip() == ""
    direct = through(view, "get", "pod", name, "-n", NS)
    assert direct.returncode != 0
    assert "NotFound" in direct.stderr


def test_its_daemonset_stops_counting_the_node(scene):
    _, _, view = scene
    status = through(
        view,
        "get",
        "ds",
        "agent",
        "-n",
        NS,
        "-o",
        "jsonpath={.status.desiredNumberScheduled} {.status.currentNumberScheduled} {.status.numberReady}",
    )
    assert status.stdout == "2 2 2"
    row = through(view, "get", "ds", "agent", "-n", NS, "--no-headers").stdout.split()
    assert row[1:6] == ["2", "2", "2", "2", "2"], row


def test_the_rest_of_the_cluster_is_unchanged(scene):
    cluster, _, view = scene
    seen = through(view, "get", "pod", "bystander", "-n", NS, "-o", "jsonpath={.metadata.uid}").stdout
    assert seen == cluster.get_json("pod", "bystander", "-n", NS)["metadata"]["uid"]
    assert through(view, "get", "nodes", "-o", "name").stdout.split() == [f"node/lab-node-{i}" for i in range(3)]


def test_every_write_is_refused_and_recorded(scene):
    cluster, hidden, view = scene
    name = hidden["metadata"]["name"]
    for args in (("delete", "pod", name, "-n", NS), ("label", "node", "lab-node-0", "view=1"), ("apply", "-f", "-")):
        result = subprocess.run(
            [str(toolchain.bin_dir() / "kubectl"), *args],
            env={**os.environ, "KUBECONFIG": str(view.test_door.kubeconfig)},
            input=BYSTANDER.replace("bystander", "intruder"), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode != 0 and "read-only" in result.stderr, (args, result.stderr)
    assert {method for method, _ in view.refused} >= {"DELETE", "PATCH"}
    assert cluster.get_json("pod", name, "-n", NS)["metadata"]["uid"] == hidden["metadata"]["uid"]
    assert "view" not in cluster.get_json("node", "lab-node-0")["metadata"].get("labels", {})
    assert cluster.kubectl("get", "pod", "intruder", "-n", NS, check=False).returncode != 0


def port_of(view: DoctoredView) -> int:
    door = view.test_door  # type: ignore[attr-defined]
    server = json.loads(door.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return int(server.rsplit(":", 1)[1].split("/")[0])


def raw(view: DoctoredView, path: str, *, with_token: bool = True) -> tuple[int, str]:
    """One GET of ``path`` exactly as written (percent-escapes and all), as a hostile checker sends it."""
    connection = http.client.HTTPConnection("127.0.0.1", port_of(view), timeout=30)
    secret = f"/{view.test_door.token}" if with_token else ""  # type: ignore[attr-defined]
    connection.putrequest("GET", secret + path, skip_accept_encoding=True)
    connection.endheaders()
    response = connection.getresponse()
    return response.status, response.read().decode(errors="replace")


@pytest.mark.parametrize("spelling", ["%70ods", "pod%73", "%70%6f%64%73"])
def test_another_spelling_of_the_path_hides_the_same_pods(scene, spelling):
    """The API server decodes percent-escapes and folds dot segments; the view decides on that path."""
    _, hidden, view = scene
    name = hidden["metadata"]["name"]
    code, listed = raw(view, f"/api/v1/namespaces/{NS}/{spelling}")
    assert code == 200
    assert name not in listed
    assert "bystander" in listed
    code, _ = raw(view, f"/api/v1/namespaces/{NS}/{spelling}/{name.replace('-', '%2D')}")
    assert code == 404
    _, daemonset = raw(view, f"/apis/apps/v1/namespaces/{NS}/%64aemonsets/agent")
    assert json.loads(daemonset)["status"]["desiredNumberScheduled"] == 2


def test_events_do_not_name_the_hidden_pod(scene):
    cluster, hidden, view = scene
    name = hidden["metadata"]["name"]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.view-test", "namespace": NS},
             "involvedObject": {"kind": "Pod", "name": name, "namespace": NS}, "reason": "Pulled",
             "message": f"pulled for {name}", "type": "Normal"}  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=json.dumps(event))
    for path in (f"/api/v1/namespaces/{NS}/events", f"/apis/events.k8s.io/v1/namespaces/{NS}/events"):
        code, listed = raw(view, path)
        assert code == 200 and name not in listed, path
    assert name not in through(view, "get", "events", "-n", NS).stdout


def test_a_malformed_request_is_refused_quietly_and_connections_are_bounded(scene, capfd):
    """A path the API server's client would not send is a 400, not a traceback on the grader's output; and
    watches left open take at most MAX_CONNECTIONS of the view's threads, given back when they close."""
    _, _, view = scene
    secret = view.test_door.token
    with socket.create_connection(("127.0.0.1", port_of(view)), timeout=10) as bad:
        bad.sendall(b"GET /%s/api/v1/namespaces/\x7f HTTP/1.1\r\nHost: view\r\n\r\n" % secret.encode())
        assert bad.recv(4096).startswith(b"HTTP/1.1 400")
    port = port_of(view)
    held = []
    for _ in range(MAX_CONNECTIONS):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", f"/{secret}/api/v1/namespaces/{NS}/pods?watch=true")
        assert connection.getresponse().status == 200
        held.append(connection)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        raw(view, "/version")
    for connection in held:
        connection.close()
    assert wait_until(lambda: raw(view, "/version")[0] == 200, 60), "the view serves again once they are gone"
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "subresource",
    [
        "namespaces/{ns}/pods/bystander/proxy/",
        "namespaces/{ns}/pods/bystander:8080/proxy/latest/meta-data",
        "namespaces/{ns}/pods/bystander/log",
        "namespaces/{ns}/pods/bystander/exec?command=id&stdout=true",
        "namespaces/{ns}/pods/bystander/attach",
        "namespaces/{ns}/pods/bystander/portforward",
        "namespaces/{ns}/services/canary:80/proxy/",
        "nodes/lab-node-0/proxy/metrics",
        "nodes/lab-node-0/log/",
        "proxy/namespaces/{ns}/pods/bystander",
        "namespaces/{ns}/pods/bystander/%70roxy/",  # a spelling the API server decodes
    ],
)
def test_the_view_dials_out_for_no_script(scene, subresource):
    """The API server would dial a Pod's, a Service's or a node's address for these (a snapshot chooses them: the
    host's loopback, a metadata service): the view refuses them before they reach it."""
    _, _, view = scene
    code, said = raw(view, "/api/v1/" + subresource.format(ns=NS))
    assert code == 403 and "objects only" in said, (code, said)
    code, listed = raw(view, f"/api/v1/namespaces/{NS}/pods/bystander")
    assert code == 200
    assert "bystander" in listed


def own_tcp_listeners() -> set[str]:
    """The TCP ports this process listens on (its sockets' inodes, found in /proc/net/tcp)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            if (target := os.readlink(fd)).startswith("socket:["):
                inodes.add(target[8:-1])
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return {row[1] for row in rows if row[3] == "0A" and row[9] in inodes}


def test_a_view_has_no_open_door_on_the_host(scene, tmp_path):
    """A view listens on Unix sockets in a folder only the grader enters; a run without a sandbox gets a TCP door
    of its own that answers only its token: a process that finds the port (a scan) reads nothing."""
    cluster, _, view = scene
    code, said = raw(view, f"/api/v1/namespaces/{NS}/configmaps", with_token=False)
    assert code == 401
    assert "another run's" in said
    assert "kube-root-ca" not in said
    assert raw(view, f"/api/v1/namespaces/{NS}/configmaps")[0] == 200  # with the door's own token
    before = own_tcp_listeners()
    with DoctoredView(cluster.kubeconfig, (), tmp_path / "view") as fresh:
        assert own_tcp_listeners() == before  # the view itself opens no port
        assert oct(fresh.socket.parent.stat().st_mode & 0o777) == "0o700"
        with fresh.door() as door:  # a sandboxed run's door: a Unix socket only
            assert door.kubeconfig is None
            assert door.token is None
            assert door.socket is not None
            assert own_tcp_listeners() == before
