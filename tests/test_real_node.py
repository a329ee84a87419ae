"""The Job's Pods on a real kubelet: the manifest ``gpulab job-manifest`` writes, unchanged, on a real node.

A lab cluster (no fake node) gets one real node (``pytest_gpulab.node``: kubelet, containerd 2.x and runc
built from the pinned modules, ``gpulab build --node``) with the grader's image loaded and the Localhost
seccomp profile ``gpulab job-seccomp-profile`` writes installed. The claim is a hostPath PersistentVolume
bound to it. The small cohort of ``test_container_job.py`` (the reference, another form, a trap, two refused
bundles) and one bundle the Pods cannot read (mode 0000 on the volume: an ``error``) are graded by the Job,
while the test kills one index's container and deletes another index's Pod mid-grading, with the default grace
period (30 s). Then: the deleted Pod stopped on SIGTERM well before its grace period ended (exit 143), writing no
outcome; the Job ends
with the unreadable index failed and the others complete; every outcome and every check's learner text
equals ``grade-batch``'s on the host; the killed and deleted indexes were run again alone; the error was
tried twice and reported; inside a Pod, root is not the node's root and learner scripts ran sandboxed; without
the Localhost profile (containerd's RuntimeDefault) a Pod refuses to grade and says why; and the node, once
down, leaves no process, mount, cgroup, network device or folder behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from container_kit import build_image, outcome, same_as_host, small_cohort

from pytest_gpulab.cluster import toolchain
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort import seccomp
from pytest_gpulab.cohort.jobs import STOPPED
from pytest_gpulab.cohort.regrade import SECRET_FILE
from pytest_gpulab.node import NodeOptions, RealNode
from pytest_gpulab.node.leftovers import leftovers
from pytest_gpulab.node.lifecycle import _bridge_name

CHECKOUT = Path(__file__).resolve().parents[1]
GPULAB = str(Path(sys.executable).with_name("gpulab"))
IMAGE = "localhost/pytest-gpulab:dev"
PROFILE = "gpulab/bwrap-localhost.json"
UNREADABLE = "fault-unreadable"
KILLED, DELETED = "form", "reference"  # the learners whose Pod is cut short, by name prefix
NODE = "gpulab-real-1"
GRACE = 30  # a Pod's default terminationGracePeriodSeconds, which the Job's manifest keeps

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="a real node needs root (mounts, cgroups, a bridge)"),
    pytest.mark.timeout(3600),
]


def run(command: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(IMAGE)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    bundles = small_cohort(tmp_path_factory.mktemp("real-node-cohort"))
    shutil.copyfile(bundles / "reference.gpulab.tar.gz", bundles / f"{UNREADABLE}.gpulab.tar.gz")
    return bundles


@pytest.fixture(scope="module")
def node(image, tmp_path_factory) -> Iterator[dict[str, Any]]:
    missing = toolchain.missing_binaries(toolchain.node_bin_dir(), [*toolchain.NODE_BINARIES, "pause"])
    assert not missing, f"the real node's {', '.join(missing)} are not built: scripts/setup builds them as root"
    base = tmp_path_factory.mktemp("real-node")
    profile = base / "bwrap-localhost.json"
    profile.write_text(json.dumps(seccomp.bwrap_localhost(json.loads(seccomp.CONTAINERS_COMMON.read_text()))))
    options = NodeOptions(images=(image,), seccomp_profiles={PROFILE: profile})
    with KwokCluster(name="real-node") as cluster:
        real = RealNode(NODE, cluster.kubeconfig, base / "node", toolchain.node_bin_dir(), cluster.bin_dir / "kubectl")
        started = time.monotonic()
        try:
            real.up(options)
            yield {"cluster": cluster, "node": real, "up_seconds": time.monotonic() - started}
        finally:
            real.down()


def volume_for_pods(volume: Path, cohort: Path) -> None:
    """bundles/ to read and results/ to write, owned by the Pods' uid and group (1000) as the idmapped volume
    shows them; the unreadable bundle owned by root, mode 0000."""
    (volume / "bundles").mkdir(parents=True)
    (volume / "results").mkdir()
    for bundle in sorted(cohort.iterdir()):
        shutil.copyfile(bundle, volume / "bundles" / bundle.name)
    for path in [volume, *volume.rglob("*")]:
        path.chmod(0o2775 if path.is_dir() else 0o664)
        os.chown(path, 1000, 1000)
    unreadable = volume / "bundles" / f"{UNREADABLE}.gpulab.tar.gz"
    if unreadable.exists():
        os.chown(unreadable, 0, 0)
        unreadable.chmod(0)


def claim(volume: Path, namespace: str = "default") -> str:
    """docs/examples/gpulab-work-hostpath.yaml, the README's, with the test's folder as the hostPath (and, in
    another namespace, a volume of that namespace's name)."""
    example = (CHECKOUT / "docs" / "examples" / "gpulab-work-hostpath.yaml").read_text()
    assert example.count("path: /srv/gpulab-work,") == 1 and example.count("namespace: default") == 2
    example = example.replace("path: /srv/gpulab-work,", f"path: {volume},")
    if namespace != "default":
        example = example.replace("namespace: default", f"namespace: {namespace}")
        example = example.replace("  name: gpulab-work\n", f"  name: gpulab-work-{namespace}\n", 1)
        example = example.replace("volumeName: gpulab-work\n", f"volumeName: gpulab-work-{namespace}\n")
    return example


class Faults:
    """Watches the Job's Pods, keeping the last state seen of each; cuts short the first Pod of KILLED's index
    (its container killed) and of DELETED's index (the Pod deleted), each while it grades (its bundle opened,
    no outcome yet); reads uid_map inside the first Pod that runs."""

    def __init__(self, real: RealNode, learners: list[str], results: Path) -> None:
        self.node, self.learners, self.results, self.done = real, learners, results, threading.Event()
        self.cut: dict[str, str] = {}  # what -> the Pod's name
        self.seen: dict[str, dict[str, Any]] = {}  # every Pod of the Job, as last seen
        self.uid_map = ""
        self.exec_errors: list[str] = []
        self.deleted_at: float | None = None  # monotonic
        self.stopped: dict[str, Any] | None = None  # the deleted Pod's end: seconds after the delete, exit, outcome
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def look(self) -> list[dict[str, Any]]:
        got = self.node.kubectl("get", "pods", "-l", "job-name=gpulab-grade", "-o", "json")
        pods = json.loads(got.stdout)["items"] if got.returncode == 0 else []
        self.seen.update({pod["metadata"]["name"]: pod for pod in pods})
        return pods

    def _watch(self) -> None:
        while not self.done.wait(0.2):
            pods = self.look()
            self._ended(pods)
            for pod in pods:
                container = container_id(pod)
                if pod["status"].get("phase") != "Running" or not container:
                    continue
                if not self.uid_map:  # a Pod that ends first (a refused bundle) leaves it to the next
                    read = self.node.ctr("tasks", "exec", f"--exec-id=uidmap-{index_of(pod)}", container, "cat",
                                     "/proc/self/uid_map")  # fmt: skip
                    self.uid_map = read.stdout if read.returncode == 0 else ""
                    self.exec_errors.append(read.stderr[-300:])
                learner = self.learners[index_of(pod)]
                for what, prefix in (("killed", KILLED), ("deleted", DELETED)):
                    if learner.startswith(prefix) and what not in self.cut and self._grading(learner):
                        self.cut[what] = pod["metadata"]["name"]
                        if what == "killed":
                            self.node.ctr("tasks", "kill", "--signal=SIGKILL", container)
                        else:  # with the default grace period: the grader stops on the kubelet's SIGTERM
                            self.deleted_at = time.monotonic()
                            self.node.kubectl("delete", "pod", pod["metadata"]["name"], "--wait=false")

    def _ended(self, pods: list[dict[str, Any]]) -> None:
        """When the deleted Pod is first seen ended (terminated, or gone): how long after its delete, its exit
        status if seen, and whether its learner's outcome.json was there."""
        if self.deleted_at is None or self.stopped is not None:
            return
        pod = next((pod for pod in pods if pod["metadata"]["name"] == self.cut["deleted"]), None)
        state = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}) if pod else {}
        if pod is not None and "terminated" not in state:
            return
        learner = self.learners[index_of(pod)] if pod else next(n for n in self.learners if n.startswith(DELETED))
        self.stopped = {
            "after": time.monotonic() - self.deleted_at,
            "exit": state.get("terminated", {}).get("exitCode"),
            "outcome": (self.results / learner / "outcome.json").exists(),
        }

    def _grading(self, learner: str) -> bool:
        folder = self.results / learner
        return (folder / "bundle.json").exists() and not (folder / "outcome.json").exists()


def index_of(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])


def container_id(pod: dict[str, Any]) -> str:
    statuses = pod["status"].get("containerStatuses") or [{}]
    return str(statuses[0].get("containerID", "")).removeprefix("containerd://")


def job_status(real: RealNode) -> dict[str, Any]:
    got = real.kubectl("get", "job", "gpulab-grade", "-o", "json")
    return json.loads(got.stdout) if got.returncode == 0 else {}


def finished(job: dict[str, Any]) -> bool:
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in job.get("status", {}).get("conditions", []))  # fmt: skip


@pytest.fixture(scope="module")
def job(node, cohort, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The Job, from `gpulab job-manifest`'s output applied unchanged, run to its end on the real node."""
    real: RealNode = node["node"]
    # A hostPath the Pods' roots can walk to, as a node's volumes are: not below pytest's 0700 folders.
    claim_dir = Path(tempfile.mkdtemp(prefix="gpulab-claim-"))
    claim_dir.chmod(0o711)
    volume = claim_dir / "gpulab-work"
    volume_for_pods(volume, cohort)
    applied = real.kubectl("apply", "-f", str(_write(volume.parent / "claim.yaml", claim(volume))))
    assert applied.returncode == 0, applied.stderr
    made = run([GPULAB, "job-manifest", str(volume / "bundles"), f"--image={IMAGE}", "--claim=gpulab-work",
                "--parallelism=2", f"--seccomp-profile={PROFILE}"])  # fmt: skip
    assert made.returncode == 0, made.stderr
    manifest_file = _write(volume.parent / "job.yaml", made.stdout)
    learners = [bundle.name.removesuffix(".gpulab.tar.gz") for bundle in sorted((volume / "bundles").iterdir())]
    indexes = {learner: index for index, learner in enumerate(learners)}
    faults = Faults(real, learners, volume / "results")
    started = time.monotonic()
    applied = real.kubectl("apply", "-f", str(manifest_file))
    assert applied.returncode == 0, applied.stderr
    faults.thread.start()
    try:
        deadline = time.monotonic() + 900
        while not finished(status := job_status(real)):
            if time.monotonic() > deadline:
                events = real.kubectl("get", "events", "--sort-by=.lastTimestamp").stdout[-4000:]
                pytest.fail(f"the Job did not end: {status.get('status')}\n{events}{real.log_tails()}")
            time.sleep(2)  # polled: a Job's end is seconds apart from its last Pod's
        seconds = time.monotonic() - started
        faults.done.set()
        faults.thread.join(30)
        faults.look()
        pods = list(faults.seen.values())
        yield {"volume": volume, "manifest": yaml.safe_load(made.stdout), "status": status, "pods": pods,
               "learners": learners, "indexes": indexes, "faults": faults, "seconds": seconds}  # fmt: skip
    finally:
        faults.done.set()
        real.kubectl("delete", "job", "gpulab-grade", "--cascade=foreground", "--wait=false")
        shutil.rmtree(claim_dir, ignore_errors=True)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def host_results(cohort, job, tmp_path_factory) -> Path:
    """The same bundles graded by grade-batch on the host, with the seed secret the Pods made on the volume."""
    results = tmp_path_factory.mktemp("host") / "results"
    secret = job["volume"] / "results" / SECRET_FILE
    batch = run([GPULAB, "grade-batch", str(cohort), "--jobs", "2", "--out", str(results), "--seed-secret",
                 str(secret)], 1800)  # fmt: skip
    assert batch.returncode == 0, batch.stderr[-3000:]
    return results


def pods_of(job: dict[str, Any], learner: str) -> list[dict[str, Any]]:
    pods = [pod for pod in job["pods"] if index_of(pod) == job["indexes"][learner]]
    return sorted(pods, key=lambda pod: pod["metadata"]["creationTimestamp"])


def exit_codes(pods: list[dict[str, Any]]) -> list[int | None]:
    codes = []
    for pod in pods:
        state = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {})
        codes.append(state.get("terminated", {}).get("exitCode"))
    return codes


def test_the_job_ends_with_every_index_graded_as_grade_batch_grades_it(node, job, host_results):
    status = job["status"]["status"]
    unreadable = str(job["indexes"][UNREADABLE])
    everything_else = [str(i) for learner, i in job["indexes"].items() if learner != UNREADABLE]
    assert status.get("failedIndexes") == unreadable, status
    assert set(_expand(status["completedIndexes"])) == set(everything_else), status
    learners = [learner for learner in job["learners"] if learner != UNREADABLE]
    statuses = same_as_host(job["volume"] / "results", host_results, learners)
    assert statuses["reference"] == ("graded", statuses["reference"][2], statuses["reference"][2])
    assert statuses["trap-version-string"][1] < statuses["trap-version-string"][2]
    refused = {learner for learner, status in statuses.items() if status[0] == "refused"}
    assert refused == {"broken-truncated", "broken-tools-a-list"}, statuses
    print(f"node Ready in {node['up_seconds']:.1f}s; the Job ran {len(job['pods'])} Pods in {job['seconds']:.0f}s")


def _expand(indexes: str) -> list[str]:
    found: list[str] = []
    for part in indexes.split(","):
        low, _, high = part.partition("-")
        found += [str(i) for i in range(int(low), int(high or low) + 1)]
    return found


def test_a_killed_container_and_a_deleted_pod_are_run_again_for_their_index_alone(job):
    faults = job["faults"]
    assert set(faults.cut) == {"killed", "deleted"}, "the faults were not made: " + repr(faults.cut)
    for learner in job["learners"]:
        pods = pods_of(job, learner)
        codes = exit_codes(pods)
        if learner.startswith(KILLED):
            assert pods[0]["metadata"]["name"] == faults.cut["killed"], (learner, [p["metadata"]["name"] for p in pods])
            assert codes == [137, 0], (learner, codes)  # SIGKILL, then graded
        elif learner.startswith(DELETED):
            assert pods[0]["metadata"]["name"] == faults.cut["deleted"], (
                learner,
                [p["metadata"]["name"] for p in pods],
            )
            assert len(codes) == 2 and codes[-1] == 0, (learner, codes)  # the deleted Pod may end unseen
            assert codes[0] in (STOPPED, None), (learner, codes)  # stopped on SIGTERM, not killed at the grace's end
        elif learner != UNREADABLE:
            assert codes == [0], (learner, codes)
    stopped = faults.stopped
    assert stopped is not None, "the deleted Pod was never seen to end"
    assert stopped["exit"] in (STOPPED, None), stopped
    assert stopped["after"] < GRACE - 10, stopped  # it stopped on SIGTERM, well before the kubelet's SIGKILL
    assert stopped["outcome"] is False, stopped  # it recorded no outcome: the second Pod graded the index
    print(f"the deleted Pod ended {stopped['after']:.1f}s after its delete (grace {GRACE}s), exit {stopped['exit']}")


def test_an_error_is_tried_once_more_then_reported(job):
    assert exit_codes(pods_of(job, UNREADABLE)) == [1, 1]
    found = outcome(job["volume"] / "results", UNREADABLE)
    assert found["status"] == "error" and "Permission denied" in found["reason"], found


def test_inside_a_pod_root_is_not_the_node_s_root_and_scripts_ran_sandboxed(job):
    faults = job["faults"]
    first = faults.uid_map.split()  # inside: uid 0, node's uid, count
    assert len(first) >= 3 and first[0] == "0" and first[1] != "0", (faults.uid_map, faults.exec_errors)
    report = json.loads((job["volume"] / "results" / "reference" / "report.json").read_text())
    assert report["sandbox"].startswith("learner scripts run sandboxed"), report["sandbox"]


def test_with_containerd_s_runtime_default_seccomp_the_pods_refuse_to_grade_and_say_why(node, cohort, job):
    """The same manifest without --seccomp-profile: containerd's RuntimeDefault forbids bubblewrap's namespaces,
    so the Pod records an error naming what it lacks instead of grading with scripts unconfined."""
    real: RealNode = node["node"]
    namespace, claim_dir = "runtime-default", Path(tempfile.mkdtemp(prefix="gpulab-claim-"))
    claim_dir.chmod(0o711)
    try:
        volume, one = claim_dir / "gpulab-work", claim_dir / "one"
        one.mkdir()
        shutil.copyfile(cohort / "reference.gpulab.tar.gz", one / "reference.gpulab.tar.gz")
        volume_for_pods(volume, one)
        assert real.kubectl("create", "namespace", namespace).returncode == 0
        applied = real.kubectl("apply", "-f", str(_write(claim_dir / "claim.yaml", claim(volume, namespace))))
        assert applied.returncode == 0, applied.stderr
        made = run([GPULAB, "job-manifest", str(volume / "bundles"), f"--image={IMAGE}", "--claim=gpulab-work",
                    f"--namespace={namespace}"])  # fmt: skip
        assert real.kubectl("apply", "-f", str(_write(claim_dir / "job.yaml", made.stdout))).returncode == 0
        ended = real.kubectl("wait", "-n", namespace, "--for=condition=Failed", "job/gpulab-grade", "--timeout=180s",
                             timeout=200)  # fmt: skip
        assert ended.returncode == 0, ended.stderr
        found = outcome(volume / "results", "reference")
        assert found["status"] == "error", found
        assert "bubblewrap could not make namespaces" in found["reason"], found["reason"]
    finally:
        real.kubectl("delete", "namespace", namespace, "--timeout=120s", timeout=150)
        real.kubectl("delete", "persistentvolume", f"gpulab-work-{namespace}", "--wait=false")
        shutil.rmtree(claim_dir, ignore_errors=True)


OWNER = """
import sys
from pathlib import Path
from pytest_gpulab.node import NodeOptions, RealNode
from pytest_gpulab.node.leftovers import leftovers
from pytest_gpulab.node.lifecycle import _bridge_name
folder, kubeconfig, node_bin, kubectl = map(Path, sys.argv[1:])
RealNode("gpulab-killed-owner", kubeconfig, folder, node_bin, kubectl).up(NodeOptions(ready_timeout=60))
print("up", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_node_whose_owner_is_killed_is_taken_down_by_its_watchdog(node, tmp_path):
    """A node a test or a library brings up ends with the process that brought it up, even killed (SIGKILL)."""
    real: RealNode = node["node"]
    folder, kubectl = tmp_path / "node", str(real.kubectl_binary)
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(folder), str(real.kubeconfig), str(real.bin_dir),
                              kubectl], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "up\n"
        assert real.kubectl("get", "node", "gpulab-killed-owner").returncode == 0
        left = leftovers("gpulab-node-gpulab-killed-owner", _bridge_name("gpulab-killed-owner"), folder)
        assert left, "the node was not up"
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 60
    while left := leftovers("gpulab-node-gpulab-killed-owner", _bridge_name("gpulab-killed-owner"), folder):
        assert time.monotonic() < deadline, f"the watchdog left: {left}"
        time.sleep(0.5)
    assert real.kubectl("get", "node", "gpulab-killed-owner").returncode != 0


def test_the_job_and_the_node_leave_nothing_behind(node, job):
    real: RealNode = node["node"]
    deleted = real.kubectl("delete", "job", "gpulab-grade", "--cascade=foreground", "--timeout=120s", timeout=150)
    assert deleted.returncode == 0, deleted.stderr
    left = real.kubectl("get", "pods", "-l", "job-name=gpulab-grade", "-o", "name")
    assert left.returncode == 0 and left.stdout.strip() == "", left.stdout
    # Each Pod's processes (its containers' and its sandbox's tasks) end with it; the records of its containers
    # are the kubelet's to collect, a minute later, and go with the node.
    deadline = time.monotonic() + 60
    while running := _tasks(real):
        assert time.monotonic() < deadline, f"the deleted Pods' processes still run on the node: {running}"
        time.sleep(1)
    assert real.down() == []  # no process, cgroup, mount, network device or folder of the node
    assert real.kubectl("get", "node", NODE).returncode != 0


def _tasks(real: RealNode) -> list[str]:
    listed = real.ctr("tasks", "list", "--quiet")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()
