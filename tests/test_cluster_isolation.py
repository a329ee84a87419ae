"""Lab clusters apart from each other and from other local users: ports of their own across processes,
components on 127.0.0.1 only, and an etcd that takes only its own cluster's components."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from processes import listening, processes_mentioning, running_commands

from pytest_gpulab.cluster import ports
from pytest_gpulab.cluster.kwok import KwokCluster, KwokClusterError
from pytest_gpulab.cluster.kwokconfig import etcd_client_env
from pytest_gpulab.cluster.kwokctl import port_is_free
from pytest_gpulab.labs.waiting import wait_until

EXAMPLES = Path(__file__).parent / "examples"
LABS = ("gpuop", "gpurt", "gpunode", "gpuquota")  # gpuquota: the example lab in tests/examples

# One process per cluster: loaded, it waits for "go" so that the four start at once; started, it makes a
# ConfigMap of its own, says so, and keeps its cluster up until its stdin closes.
CHILD = """
import json, sys
from pathlib import Path
from pytest_gpulab.cluster.kwok import KwokCluster

lab, workdir, lab_dir = sys.argv[1:]
print("loaded", flush=True)
sys.stdin.readline()
with KwokCluster.for_lab(lab, lab_dirs=[Path(lab_dir)], name="tests-isolation", workdir=Path(workdir)) as cluster:
    cluster.kubectl("create", "configmap", f"made-by-{lab}", f"--from-literal=lab={lab}")
    print(json.dumps({"seconds": cluster.startup_seconds}), flush=True)
    sys.stdin.readline()
"""


def _recorded(cluster_dir: Path, pattern: str) -> str:
    """A value from kwokctl's record of the cluster."""
    found = re.search(pattern, (cluster_dir / "kwok.yaml").read_text(), re.MULTILINE)
    assert found, pattern
    return found[1]


def configured_ports(cluster_dir: Path) -> dict[str, int]:
    """The cluster's six ports."""
    return {option: int(_recorded(cluster_dir, rf"^\s*{option}: (\d+)$")) for option in ports.PORT_OPTIONS}


def etcd_socket(cluster_dir: Path) -> Path:
    """The Unix socket the cluster's API server reaches its etcd by."""
    return Path(_recorded(cluster_dir, r"--listen-client-urls=unix://([^,]+),"))


def listening_of(cluster_dir: Path) -> set[tuple[str, int]]:
    """Where the cluster's components listen (they run from the cluster's directory)."""
    pids = {pid for pid, command in running_commands().items() if f"{cluster_dir}/bin/" in command}
    assert len(pids) >= 5, running_commands()
    return listening(pids)


def _line(child: subprocess.Popen[str], errors: Path) -> str:
    line = child.stdout.readline() if child.stdout else ""
    assert line, f"the cluster's process ended early:\n{errors.read_text()[-3000:]}"
    return line.strip()


def _stop_all(children: dict[str, subprocess.Popen[str]], workdirs: dict[str, Path]) -> None:
    """Each process stops its cluster when its stdin closes; kwokctl's clusters run detached, so each is
    deleted here too, whatever became of its process."""
    for child in children.values():
        if child.stdin:
            child.stdin.close()
    for child in children.values():
        try:
            child.wait(timeout=120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    failures = []
    for workdir in workdirs.values():
        try:
            KwokCluster("tests-isolation", workdir=workdir).stop()
        except KwokClusterError as error:
            failures.append(str(error))
    assert not failures, failures


def test_four_clusters_started_at_once_from_four_processes_hold_only_their_own_objects(tmp_path):
    workdirs = {lab: tmp_path / lab for lab in LABS}
    children: dict[str, subprocess.Popen[str]] = {}
    try:
        for lab in LABS:
            command = [sys.executable, "-c", CHILD, lab, str(workdirs[lab]), str(EXAMPLES)]
            with (tmp_path / f"{lab}.stderr").open("w") as errors:
                children[lab] = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
                )
        assert {_line(child, tmp_path / f"{lab}.stderr") for lab, child in children.items()} == {"loaded"}
        for child in children.values():
            assert child.stdin
            child.stdin.write("go\n")
            child.stdin.flush()
        for lab, child in children.items():
            json.loads(_line(child, tmp_path / f"{lab}.stderr"))
        clusters = {lab: KwokCluster("tests-isolation", workdir=workdir) for lab, workdir in workdirs.items()}
        for lab, cluster in clusters.items():
            made = cluster.kubectl("get", "configmaps", "-A", "-o", "jsonpath={.items[*].metadata.name}").stdout
            assert {name for name in made.split() if name.startswith("made-by-")} == {f"made-by-{lab}"}
            lab_nodes = {node.name for node in KwokCluster.for_lab(lab, lab_dirs=[EXAMPLES]).nodes}
            assert set(cluster.kubectl("get", "nodes", "-o", "name").stdout.split()) == {f"node/{n}" for n in lab_nodes}
        identities = {cluster.get_json("namespace", "kube-system")["metadata"]["uid"] for cluster in clusters.values()}
        assert len(identities) == len(LABS)  # four etcds
        configured = {lab: set(configured_ports(cluster.cluster_dir).values()) for lab, cluster in clusters.items()}
        assert len(set().union(*configured.values())) == len(LABS) * len(ports.PORT_OPTIONS), configured
        for lab, cluster in clusters.items():
            assert {port for _, port in listening_of(cluster.cluster_dir)} == configured[lab]
    finally:
        _stop_all(children, workdirs)
    assert wait_until(lambda: not processes_mentioning(str(tmp_path)), 60), processes_mentioning(str(tmp_path))


def _put_as(user: list[str], port: int) -> str:
    """A plain HTTP write to etcd's v3 gateway, as ``curl http://127.0.0.1:PORT/v3/kv/put`` would make it."""
    code = (
        "import http.client, sys\n"
        "connection = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]), timeout=5)\n"
        "try:\n"
        '    connection.request(\'POST\', \'/v3/kv/put\', body=\'{"key": "aW50cnVkZXI=", "value": "eWVz"}\')\n'
        "    print(connection.getresponse().status)\n"
        "except (OSError, http.client.HTTPException) as error:\n"
        "    print(type(error).__name__)\n"
    )
    result = subprocess.run([*user, sys.executable, "-I", "-c", code, str(port)], capture_output=True, text=True)
    return result.stdout.strip() or result.stderr.strip()


def _other_uid() -> list[str]:
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("runs a command as another user: needs root and setpriv")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_a_cluster_listens_on_loopback_only(gpuop_cluster):
    found = listening_of(gpuop_cluster.cluster_dir)
    assert found == {("127.0.0.1", port) for port in configured_ports(gpuop_cluster.cluster_dir).values()}


def test_etcd_refuses_a_plain_write_and_only_the_user_reaches_its_socket(gpuop_cluster):
    port = configured_ports(gpuop_cluster.cluster_dir)["etcdPort"]
    assert _put_as([], port) != "200"  # TLS with a client certificate of the cluster's CA, nothing else
    etcdctl = [str(gpuop_cluster.bin_dir / "etcdctl"), "--endpoints", f"127.0.0.1:{port}", "--command-timeout=10s"]
    env = {**os.environ, **etcd_client_env(gpuop_cluster.cluster_dir)}
    read = subprocess.run([*etcdctl, "get", "intruder"], env=env, capture_output=True, text=True, timeout=30)
    assert read.returncode == 0 and read.stdout == "", read.stderr
    assert etcd_socket(gpuop_cluster.cluster_dir).parent.stat().st_mode & 0o077 == 0  # the user's only


def test_etcd_refuses_another_user(gpuop_cluster):
    other = _other_uid()
    port = configured_ports(gpuop_cluster.cluster_dir)["etcdPort"]
    assert _put_as(other, port) != "200"
    code = (
        "import socket, sys\n"
        "try:\n"
        "    socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n"
        "    print('connected')\n"
        "except OSError as error:\n"
        "    print(type(error).__name__)\n"
    )
    socket_path = str(etcd_socket(gpuop_cluster.cluster_dir))
    reached = subprocess.run([*other, sys.executable, "-I", "-c", code, socket_path], capture_output=True, text=True)
    assert reached.stdout.strip() == "PermissionError", reached.stdout + reached.stderr
    key = subprocess.run([*other, "cat", str(gpuop_cluster.cluster_dir / "pki" / "admin.key")], capture_output=True)
    assert key.returncode != 0  # the work directory is the user's only: kwokctl writes the keys mode 644


# A process that reserves blocks and holds them until its stdin closes, as a cluster's start does.
RESERVER = """
import sys
from pathlib import Path
from pytest_gpulab.cluster import ports

owner, count, *starts = sys.argv[1:]
held = [ports.reserve(Path(owner) / str(index), [int(start) for start in starts]) for index in range(int(count))]
print(" ".join(str(reservation.start) for reservation in held), flush=True)
sys.stdin.readline()
"""


def _free_blocks(count: int) -> list[int]:
    size = len(ports.PORT_OPTIONS)
    free = [start for start in ports.block_starts() if all(port_is_free(p) for p in range(start, start + size))]
    return free[:count]


def _reserver(owner: Path, count: int, starts: list[int]) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", RESERVER, str(owner), str(count), *map(str, starts)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_processes_reserving_at_once_never_get_the_same_block(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_RUNTIME_DIR", str(tmp_path / "runtime"))
    starts = _free_blocks(24)
    children = [_reserver(tmp_path / f"process-{index}", 6, starts) for index in range(4)]
    try:
        got = [child.stdout.readline().split() if child.stdout else [] for child in children]  # all held at once
    finally:
        for child in children:
            child.communicate("\n", timeout=60)
    assert sorted(int(start) for held in got for start in held) == sorted(starts)


def test_a_reservation_outlives_its_process_until_its_cluster_is_gone(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_RUNTIME_DIR", str(tmp_path / "runtime"))
    [start] = _free_blocks(1)
    creating = _reserver(tmp_path / "work" / "clusters", 1, [start])  # reserves for clusters/0
    assert creating.stdout
    assert creating.stdout.readline().split() == [str(start)]
    with pytest.raises(OSError, match="no block"):
        ports.reserve(tmp_path / "other", [start])  # held by the process that creates the cluster
    cluster_dir = tmp_path / "work" / "clusters" / "0"
    cluster_dir.mkdir(parents=True)
    (cluster_dir / "kwok.yaml").write_text(f"options:\n  etcdPort: {start}\n")  # as kwokctl records it
    creating.communicate("\n", timeout=30)  # the process ends without releasing, as `gpulab up` does
    with pytest.raises(OSError, match="no block"):
        ports.reserve(tmp_path / "other", [start])  # held by the cluster the record names
    (cluster_dir / "kwok.yaml").write_text(f"options:\n  etcdPort: {start + 6}\n")  # that directory's next cluster
    reservation = ports.reserve(tmp_path / "other", [start])
    assert reservation.options()["etcdPort"] == start
    with pytest.raises(OSError, match="no block"):
        ports.reserve(tmp_path / "third", [start])  # held by this process now
    reservation.release()
    shutil.rmtree(cluster_dir)
    ports.reserve(tmp_path / "third", [start]).release()


def test_gpulab_up_keeps_its_ports_after_it_ends_and_while_stopped_until_down(tmp_path, monkeypatch):
    """A restart stops the cluster `gpulab up` made; its ports stay its own, for `kwokctl start`."""
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    cluster = KwokCluster("gpulab-gpuop", workdir=tmp_path / "cache" / "clusters" / "gpuop")
    gpulab = [sys.executable, "-m", "pytest_gpulab.cli"]
    try:
        up = subprocess.run([*gpulab, "up", "gpuop"], capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stderr
        start = configured_ports(cluster.cluster_dir)["etcdPort"]
        stop = [str(cluster.bin_dir / "kwokctl"), "stop", "cluster", "--name", cluster.name]
        subprocess.run(stop, env=cluster.environment(), capture_output=True, check=True, timeout=120)
        size = len(ports.PORT_OPTIONS)
        assert wait_until(lambda: all(port_is_free(port) for port in range(start, start + size)), 60)
        with pytest.raises(OSError, match="no block"):
            ports.reserve(tmp_path / "other", [start])
    finally:
        down = subprocess.run([*gpulab, "down", "gpuop"], capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr
    ports.reserve(tmp_path / "other", [start]).release()
