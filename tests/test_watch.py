"""The watch's core without a terminal or a cluster: what a step reads, the lab root's files watched, the table,
and gradings in order (a lab of files only, graded by real `pytest --lab` runs)."""

from __future__ import annotations

import io
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from unittest.mock import ANY

from processes import processes_mentioning

from pytest_gpulab.labs import discover
from pytest_gpulab.watch.changes import FILE, OBJECT, UNKNOWN, Change
from pytest_gpulab.watch.core import Watcher
from pytest_gpulab.watch.files import TreeWatch
from pytest_gpulab.watch.grading import Grader
from pytest_gpulab.watch.kube import digest
from pytest_gpulab.watch.reads import Reads, lab_kinds, reads_of, static_reads, touched
from pytest_gpulab.watch.table import Row, Table, lines
from pytest_gpulab.watch.view import PlainView

BOUND = 60  # a generous bound on a loaded machine: what is waited for happens well before

LAB_TOML = 'name = "tinywatch"\ntitle = "Two files"\ndefault_root = "/root/tinywatch"\nrubric_version = "1"\n'
STEP = """
import pytest
from pytest_gpulab.grading import expect

pytestmark = pytest.mark.step({number}, "File {name}", points=5)

def test_says_ok(learner):
    expect(learner.file("{name}").exists() and learner.file("{name}").text().strip() == "ok", "{name} should say ok.")
"""


def test_a_step_module_names_the_files_and_kinds_it_reads():
    reads = static_reads(discover().get("gpuop"))
    assert "etc/containerd/conf.d/99-nvidia.toml" in (reads[2] or Reads(frozenset(), frozenset())).files
    assert {"Node", "Pod", "DaemonSet", "RuntimeClass"} <= lab_kinds(reads)
    dropin = Change(FILE, "etc/containerd/conf.d/99-nvidia.toml")
    assert {2, 3} <= touched([dropin], reads) and 8 not in touched([dropin], reads)
    assert touched([Change(OBJECT, "gpu-operator/nvidia-container-toolkit", "DaemonSet")], reads) == {8}
    assert touched([Change(UNKNOWN, "")], reads) == set(reads)
    assert touched([Change(FILE, "anything")], {1: None}) == {1}, "a step whose reads are unknown: every change"


def test_a_step_that_recorded_evidence_reads_what_it_recorded_with_what_its_module_names():
    static = Reads(frozenset({"out/merge.txt"}), frozenset({"Node"}))
    entry = {"checks": [{"evidence": [
        {"file": "etc/containerd/config.toml", "lines": []},
        {"object": {"kind": "RuntimeClass", "namespace": None, "name": "nvidia", "resourceVersion": "7"}},
    ]}]}  # fmt: skip
    reads = reads_of(entry, static)
    assert reads is not None
    assert reads.files == {"etc/containerd/config.toml", "out/merge.txt"}
    assert reads.kinds == {"RuntimeClass", "Node"}
    assert reads_of({"checks": [{"evidence": []}]}, static) is static, "nothing recorded: the module's names"
    ran = reads_of({"checks": [{"evidence": [{"run": {"script": "bin/check.sh", "cluster": True}}]}]})
    assert ran is not None and "bin/check.sh" in ran.files
    assert touched([Change(OBJECT, "gpu-lab/x", "ConfigMap")], {4: ran}) == {4}, (
        "a script on the cluster reads any kind"
    )
    assert "*" not in lab_kinds({4: ran}), "no watch is opened for 'any kind'"


def test_the_lab_root_is_watched_with_new_folders_and_without_git(tmp_path):
    changes: queue.Queue[Change] = queue.Queue()
    root = tmp_path / "root"
    watch = TreeWatch(root, changes.put)
    watch.start()
    try:
        root.mkdir()
        assert changes.get(timeout=BOUND).what == UNKNOWN, "a root made after the watch began is watched"
        (root / ".git").mkdir()
        (root / "out").mkdir()
        assert changes.get(timeout=BOUND) == Change(FILE, "out")
        (root / ".git" / "index").write_text("x")
        (root / "out" / ".a.txt.swp").write_text("x")
        (root / "out" / "a.txt").write_text("x")
        assert changes.get(timeout=BOUND) == Change(FILE, "out/a.txt"), ".git and vim's swap file are no change"
    finally:
        watch.stop()
    assert not watch.problems


def test_a_row_shows_its_outcome_points_age_and_first_sentence():
    table = Table("gpuop", 47, rubric="2")
    entry = {"number": 2, "title": "drop-in", "outcome": "failed", "earned": 0, "points": 10, "message": "Wrong."}
    entry["checks"] = [{"name": "nvidia-runtime", "outcome": "failed", "message": "Wrong."}, {"outcome": "passed"}]
    table.rows[2] = Row(2, "drop-in", entry, graded_at=100.0, state="queued")
    shown = lines(table, 80, now=112.0)
    assert shown[1].split() == ["2", "drop-in", "0/10", "failed,", "queued", "12s", "ago"]
    assert shown[2].strip() == "nvidia-runtime: Wrong."
    assert shown[-1] == "total: 0/10 points · lab gpuop · rubric 2 · seed 47"


class Events:
    def __init__(self) -> None:
        self.seen: queue.Queue[tuple[str, Any]] = queue.Queue()

    def update(self, table: Table, event: str, detail: Any = None) -> None:
        self.seen.put((event, detail if event != "step" else (detail, table.rows[detail].outcome)))

    def until(self, wanted: tuple[str, Any]) -> list[tuple[str, Any]]:
        got: list[tuple[str, Any]] = []
        while not got or got[-1] != wanted:  # ANY in ``wanted`` matches any detail
            got.append(self.seen.get(timeout=BOUND))
        return got


def tiny_lab(tmp_path: Path) -> Path:
    lab = tmp_path / "labs" / "tinywatch"
    lab.mkdir(parents=True)
    (lab / "lab.toml").write_text(LAB_TOML)
    for number, name in ((1, "a.txt"), (2, "b.txt")):
        (lab / f"step{number}_file.py").write_text(STEP.format(number=number, name=name))
    return lab


def alternate(seen: list[tuple[str, Any]]) -> bool:
    """Each grading ends (graded) before the next begins."""
    marks = [event for event, _ in seen if event in ("grading", "graded")]
    return all(mark == ("grading", "graded")[index % 2] for index, mark in enumerate(marks))


def test_touched_steps_go_first_one_grading_at_a_time_and_no_change_is_lost(tmp_path):
    lab_folder = tiny_lab(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("ok")
    events = Events()
    grader = Grader("tinywatch", root, None, 47, (lab_folder.parent,))
    watcher = Watcher(grader, static_reads(discover([lab_folder.parent]).get("tinywatch")), events)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        seen = events.until(("step", (2, "failed")))
        assert ("grading", [1, 2]) in seen and ("step", (1, "passed")) in seen
        seen += events.until(("graded", ANY))
        (root / "a.txt").write_text("no")
        touched_first = events.until(("step", (2, "failed")))
        gradings = [detail for event, detail in touched_first if event == "grading"]
        assert gradings == [[1], [2]], "step 1, which reads a.txt, first; then the rest"
        assert touched_first.index(("step", (1, "failed"))) < touched_first.index(("grading", [2]))
        seen += touched_first + events.until(("graded", ANY))
        (root / "b.txt").write_text("ok")
        seen += events.until(("grading", ANY))
        (root / "a.txt").write_text("ok")  # during a grading: graded after it
        seen += events.until(("step", (1, "passed")))
        seen += events.until(("step", (2, "passed")))
    finally:
        watcher.stop()
        thread.join(BOUND)
    assert not thread.is_alive()
    assert alternate(seen), seen
    assert watcher.idle or watcher.gradings >= 5


def test_plain_lines_say_each_change_and_each_new_verdict_once():
    out = io.StringIO()
    view = PlainView(out, ["gpulab watch: lab gpuop"])
    table = Table("gpuop", 47, rubric="2")
    table.rows[2] = Row(2, "drop-in", {"number": 2, "outcome": "passed", "earned": 10, "points": 10})
    view.update(table, "step", 2)
    view.update(table, "step", 2)
    view.update(table, "changed", ([Change(FILE, "etc/x.toml")], [2]))
    said = out.getvalue().splitlines()
    assert said[0] == "gpulab watch: lab gpuop"
    assert len([line for line in said if "step 2 passed 10/10 (drop-in)" in line]) == 1
    assert said[-1].endswith("changed: etc/x.toml; step 2 first")


def test_pytest_watch_prints_a_line_per_change_when_not_on_a_terminal_and_stops_on_sigint(tmp_path):
    lab_folder = tiny_lab(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    command = [sys.executable, "-m", "pytest", f"--lab-dir={lab_folder.parent}", "--lab=tinywatch"]
    command += ["--lab-root=root", "--lab-seed=5", "--watch", "-p", "no:cacheprovider"]  # relative to its cwd
    watching = subprocess.Popen(
        command, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    said: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in watching.stdout or ():
            said.put(line)

    threading.Thread(target=read, daemon=True).start()

    def line_with(text: str) -> str:
        while text not in (line := said.get(timeout=BOUND).rstrip("\n")):
            continue
        return line

    try:
        assert "seed 5 [the option --lab-seed] (replay with --lab-seed=5)" in line_with("seed 5")
        assert "step 2 failed 0/5 (File b.txt): b.txt should say ok." in line_with("step 2")
        line_with("total: 0/10 points · lab tinywatch · rubric 1 · seed 5")
        (root / "a.txt").write_text("ok")
        assert line_with("changed:").endswith("changed: a.txt; step 1 first")
        assert "step 1 passed 5/5" in line_with("step 1")
        line_with("total: 5/10 points")
    finally:
        watching.send_signal(signal.SIGINT)
        _, errors = watching.communicate(timeout=BOUND)
    assert watching.returncode == 0, errors
    assert "gpulab watch: stopped" in errors
    assert not processes_mentioning(str(root))


def test_a_heartbeat_or_a_new_resource_version_is_no_change():
    ready = {"type": "Ready", "lastHeartbeatTime": "2026-12-07T16:00:00Z"}
    node: dict[str, Any] = {"metadata": {"name": "n", "resourceVersion": "1"}, "status": {"conditions": [ready]}}
    renewed: dict[str, Any] = {**node, "metadata": {"name": "n", "resourceVersion": "2", "managedFields": [{}]}}
    renewed["status"] = {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-12-07T16:00:40Z"}]}
    assert digest(node) == digest(renewed)
    tainted = {**node, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert digest(node) != digest(tainted)


def test_watch_grades_the_cluster_being_worked_on_not_an_ephemeral_one(pytester):
    result = pytester.runpytest_subprocess(
        "--lab=gpuop", "--watch", "--lab-cluster=ephemeral", "-p", "no:cacheprovider"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--watch grades the cluster you work on*"])
