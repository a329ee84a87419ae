"""Grading away from the learner's machine: a bundle's verdicts are the live ones, step by step, and a
batch of them makes a cohort report whose numbers are the cohort's."""

from __future__ import annotations

import csv
import itertools
import json
import signal
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from browser_kit import dump_dom, needs_chromium, parse_dom
from cohort_cases import CohortRun, verdicts

from pytest_gpulab.labs.waiting import wait_until

GPULAB = str(Path(sys.executable).with_name("gpulab"))
DEFAULT_SIGINT_THEN_EXEC = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)
pytestmark = pytest.mark.timeout(3600)  # the session's cohort is made and graded in the first test's setup


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_bundle_gives_the_verdicts_it_had_live(gpuop_cohort: CohortRun):
    """The reference, the forms, every trap of gpuop and two cluster states: graded from the bundle in a
    fresh cluster, each step's and each check's outcome and learner text are those of the live grading."""
    assert gpuop_cohort.batch.returncode == 0, gpuop_cohort.batch.stderr[-3000:]
    differ = {}
    for learner, submission in gpuop_cohort.builder.submissions.items():
        outcome = read(gpuop_cohort.results / learner / "outcome.json")
        assert outcome["status"] == "graded", (learner, outcome["reason"])
        bundled = verdicts(read(gpuop_cohort.results / learner / "report.json"))
        if bundled != submission.live:
            differ[learner] = {n: (submission.live[n], bundled[n]) for n in bundled if bundled[n] != submission.live[n]}
        failed = {n for n, (step_outcome, _) in bundled.items() if step_outcome != "passed"}
        assert failed == submission.failing, (learner, failed)
    assert differ == {}
    assert len(gpuop_cohort.builder.submissions) >= 20


def test_the_cohort_report_holds_the_variants_pass_rates(gpuop_cohort: CohortRun):
    submissions = gpuop_cohort.builder.submissions.values()
    report = read(gpuop_cohort.results / "cohort.json")
    assert report["learners"] == len(submissions) + len(gpuop_cohort.refused)
    assert report["graded"] == len(submissions)
    for step in report["steps"]:
        expected = sum(step["number"] not in s.failing for s in submissions) / len(submissions)
        assert step["pass_rate"] == pytest.approx(expected), step
    with open(gpuop_cohort.results / "cohort.csv", newline="") as stream:
        rows = {row["learner"]: row for row in csv.DictReader(stream)}
    for learner, submission in gpuop_cohort.builder.submissions.items():
        assert {n for n in range(1, 9) if rows[learner][f"step {n}"] != "passed"} == submission.failing
    for learner, reason in gpuop_cohort.refused.items():
        assert rows[learner]["status"] == "refused" and reason in rows[learner]["reason"], rows[learner]
    assert "<svg" in (gpuop_cohort.results / "cohort.html").read_text()


def test_the_batch_shows_its_progress_and_writes_every_report(gpuop_cohort: CohortRun):
    total = len(gpuop_cohort.builder.submissions) + len(gpuop_cohort.refused)
    assert f"[{total}/{total}]" in gpuop_cohort.batch.stderr
    for learner in gpuop_cohort.builder.submissions:
        folder = gpuop_cohort.results / learner
        assert {"report.json", "results.json", "junit.xml", "output.txt", "bundle.json"} <= {
            p.name for p in folder.iterdir()
        }
    escaped = [p for p in gpuop_cohort.builder.base.rglob("escaped")]
    assert escaped == [], "a bundle wrote outside the grader's directory"


def test_bundle_command_writes_the_lab_root_and_the_cluster(gpuop_cohort: CohortRun, tmp_path):
    """`gpulab bundle` itself, on the cohort's reference: links are left out and listed."""
    from pytest_gpulab.cluster.kwok import KwokCluster

    root = gpuop_cohort.builder.base / "reference-root"
    with KwokCluster.for_lab("gpuop", name="tests-bundle-command") as cluster:
        (tmp_path / "root").mkdir()
        (tmp_path / "root" / "out").mkdir()
        (tmp_path / "root" / "out" / "answer.txt").write_text("42\n")
        (tmp_path / "root" / "secret").symlink_to(root / "out")
        made = subprocess.run(
            [GPULAB, "bundle", "gpuop", "-o", str(tmp_path / "b.gpulab.tar.gz"), f"--lab-root={tmp_path / 'root'}",
             f"--kubeconfig={cluster.kubeconfig}"], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "left out secret: a symbolic link" in made.stdout
    with tarfile.open(tmp_path / "b.gpulab.tar.gz") as archive:
        names = archive.getnames()
        manifest = json.loads(archive.extractfile("gpulab-bundle.json").read())  # type: ignore[union-attr]
    assert names == ["gpulab-bundle.json", "cluster/etcd.db", "root/out/answer.txt"]
    assert manifest["lab"] == "gpuop"
    assert manifest["rubric_version"]
    assert manifest["tools"]["etcd"]
    assert manifest["refused"] == [{"path": "secret", "reason": "a symbolic link (links are not followed)"}]


def test_an_interrupted_batch_resumes_where_it_stopped(gpuop_cohort: CohortRun, tmp_path):
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    names = ("reference", "trap-version-string", "state-untouched")
    for name in names:
        (bundles / f"{name}.gpulab.tar.gz").write_bytes(
            (gpuop_cohort.builder.bundles / f"{name}.gpulab.tar.gz").read_bytes()
        )
    results = tmp_path / "results"
    command = [GPULAB, "grade-batch", str(bundles), "--jobs", "1", "--out", str(results)]
    # Started as an instructor's Ctrl-C reaches it: a shell's background job (a CI runner's, say) hands on SIGINT
    # ignored, and Python then installs no KeyboardInterrupt.
    interruptible = [sys.executable, "-c", DEFAULT_SIGINT_THEN_EXEC, *command]
    first = subprocess.Popen(
        interruptible, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert wait_until(lambda: any(results.glob("*/outcome.json")), 120, interval=0.1)
    first.send_signal(signal.SIGINT)
    _, said = first.communicate(timeout=120)
    assert first.returncode == 130 and "run the same command again" in said, said
    done = {p.parent.name: p.stat().st_mtime_ns for p in results.glob("*/outcome.json")}
    assert 1 <= len(done) < len(names), done
    again = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("already graded") == len(done)
    assert {p.parent.name for p in results.glob("*/outcome.json")} == set(names)
    assert all((results / name / "outcome.json").stat().st_mtime_ns == mtime for name, mtime in done.items())


@needs_chromium
def test_the_cohort_page_shows_the_cohort_s_numbers_in_a_browser(gpuop_cohort: CohortRun, tmp_path):
    """The batch's own cohort.html, rendered by headless Chromium: its pass-rate chart and its learner rows are
    the cohort's, and it asks for nothing over the network."""
    report = read(gpuop_cohort.results / "cohort.json")
    dom, requests = dump_dom(gpuop_cohort.results / "cohort.html", tmp_path)
    page = parse_dom(dom)
    drawn = {int(g.attrs["data-step"]): float(g.attrs["data-pass-rate"]) for g in page.select("g", "step-rate")}
    assert drawn == pytest.approx({step["number"]: step["pass_rate"] for step in report["steps"]}, abs=1e-4)
    rows = {row.attrs["data-learner"]: row.attrs["data-status"] for row in page.select("tr", "learner")}
    assert rows == {**dict.fromkeys(gpuop_cohort.builder.submissions, "graded"),
                    **dict.fromkeys(gpuop_cohort.refused, "refused")}  # fmt: skip
    assert requests == []


@pytest.mark.parametrize("lab", ["gpurt", "gpunode"])
def test_the_other_labs_references_pass_every_step_from_a_bundle(lab, tmp_path):
    """gpurt's RuntimeClasses and gpunode's MachineConfigPool custom resources come back with the snapshot."""
    from grading import solve

    from pytest_gpulab.cluster.kwok import KwokCluster
    from pytest_gpulab.cohort.bundle import write_bundle
    from pytest_gpulab.cohort.regrade import grade_bundle
    from pytest_gpulab.labs import discover

    (tmp_path / "root").mkdir()
    with KwokCluster.for_lab(lab, name=f"tests-bundle-{lab}") as cluster:
        solve(lab, cluster, tmp_path / "root")
        write_bundle(discover().get(lab), tmp_path / "root", cluster, tmp_path / f"{lab}.gpulab.tar.gz")
    outcome = grade_bundle(tmp_path / f"{lab}.gpulab.tar.gz", tmp_path / "out")
    assert (outcome.status, outcome.earned) == ("graded", outcome.possible), outcome.reason


def test_a_bundle_whose_cluster_would_call_a_webhook_is_refused_and_the_webhook_is_never_called(tmp_path):
    """A hostile snapshot's webhook that matches every write: the grading cluster's API server writes as it
    starts (its lease, the kubernetes Service's endpoints), before the bundle can be read and refused. It calls
    no webhook then, nor after: grading clusters run without webhook admission, and the bundle is refused."""
    from pytest_gpulab.cluster.kwok import KwokCluster
    from pytest_gpulab.cohort.bundle import write_bundle
    from pytest_gpulab.cohort.regrade import grade_bundle
    from pytest_gpulab.labs import discover

    calls: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        stop = threading.Event()
        counting = threading.Thread(target=_count_connections, args=(listener, stop, calls), daemon=True)
        counting.start()
        try:
            (tmp_path / "root").mkdir()
            with KwokCluster.for_lab("gpuop", name="tests-bundle-webhook") as cluster:
                webhook = _webhook_on_every_write(listener.getsockname()[1])
                cluster.kubectl("apply", "-f", "-", input=json.dumps(webhook))
                writes = itertools.count()  # the webhook is called once the API server has seen it, a moment later

                def written() -> list[str]:
                    cluster.kubectl("create", "configmap", f"write-{next(writes)}")
                    return calls

                assert wait_until(written, 60, interval=0.2), "the live cluster never called the webhook"
                write_bundle(discover().get("gpuop"), tmp_path / "root", cluster, tmp_path / "hostile.gpulab.tar.gz")
            calls.clear()
            outcome = grade_bundle(tmp_path / "hostile.gpulab.tar.gz", tmp_path / "out")
        finally:
            stop.set()
            counting.join(timeout=5)
    assert outcome.status == "refused", outcome.reason
    assert "validatingwebhookconfigurations/every-write" in str(outcome.reason)
    assert calls == []


def _count_connections(listener: socket.socket, stop: threading.Event, calls: list[str]) -> None:
    while not stop.is_set():
        try:
            connection, peer = listener.accept()
        except TimeoutError:
            continue
        calls.append(str(peer))
        connection.close()


def _webhook_on_every_write(port: int) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "every-write"},
        "webhooks": [{
            "name": "every-write.gpulab.test",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/"},
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}],
            "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 1,
        }],
    }  # fmt: skip


def test_an_address_of_the_grading_machine_in_the_unit_of_each_kind_is_told_apart():
    from pytest_gpulab.cluster.addresses import ADDRESSES, the_machine_s

    for address in ("127.0.0.1", "::1", "169.254.169.254", "fe80::1", "0.0.0.0", "localhost", "metadata.localhost"):
        assert the_machine_s(address), address
    for address in ("10.0.0.1", "192.0.2.200", "gpu.example.com"):
        assert not the_machine_s(address), address
    pod = {"status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "169.254.169.254"}]}}
    assert ADDRESSES["/api/v1/pods"](pod) == ["10.0.0.1", "169.254.169.254"]
    node = {
        "status": {
            "addresses": [{"type": "Hostname", "address": "localhost"}, {"type": "InternalIP", "address": "127.0.0.1"}]
        }
    }
    assert ADDRESSES["/api/v1/nodes"](node) == ["127.0.0.1"]  # kwok's own Hostname, localhost, is not refused


def test_a_snapshot_whose_objects_point_at_the_grading_machine_is_refused(tmp_path):
    """Endpoints of a Service and a Pod's IP on the host's loopback or the metadata address: the API server would
    dial them for a proxy. The bundle is refused with a sentence before any grading."""
    from pytest_gpulab.cluster.kwok import KwokCluster
    from pytest_gpulab.cohort.bundle import write_bundle
    from pytest_gpulab.cohort.regrade import grade_bundle
    from pytest_gpulab.labs import discover

    (tmp_path / "root").mkdir()
    metadata_service = json.dumps({"status": {"podIP": "169.254.169.254", "podIPs": [{"ip": "169.254.169.254"}]}})
    loopback = json.dumps({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}})
    with KwokCluster.for_lab("gpuop", name="tests-bundle-loopback") as cluster:
        cluster.kubectl("run", "canary", "--image=busybox", "-n", "default", "--overrides",
                        json.dumps({"spec": {"nodeName": "lab-node-1"}}))  # fmt: skip
        cluster.kubectl("patch", "pod", "canary", "-n", "default", "--subresource=status", "--type=merge",
                        "-p", metadata_service)  # fmt: skip
        cluster.kubectl("patch", "node", "lab-node-0", "--subresource=status", "--type=merge", "-p", loopback)
        write_bundle(discover().get("gpuop"), tmp_path / "root", cluster, tmp_path / "loopback.gpulab.tar.gz")
    outcome = grade_bundle(tmp_path / "loopback.gpulab.tar.gz", tmp_path / "out")
    assert outcome.status == "refused", outcome.reason
    reason = str(outcome.reason)
    assert "grading machine's own" in reason and "nodes/lab-node-0 (127.0.0.1)" in reason, reason
    assert "pods/default/canary (169.254.169.254)" in reason, reason
