"""`gpulab watch gpuop` in a real terminal (tmux): a file broken and fixed, a cluster change, Ctrl-C, nothing left."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grading
import pytest
from processes import processes_mentioning, running_commands

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.watch.changes import OBJECT, Change
from pytest_gpulab.watch.kube import ClusterWatch

BOUND = 180  # a generous bound for a grading on a loaded machine: the test waits for what the screen says
DROPIN = "etc/containerd/conf.d/99-nvidia.toml"
ROW = re.compile(r"^\s*(\d+)\s+.*?\s(\d+|-)/(\d+)\s\s(.+?)\s*(\d+[smh] ago)?$")


class Terminal:
    """A tmux server of this test's own (its own socket), one pane running a plain bash."""

    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket, self.env = socket, env

    def tmux(self, *args: str) -> str:
        command = ["tmux", "-S", str(self.socket), *args]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=30, check=True)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "watch")

    def status(self, step: int) -> str | None:
        """The step's row's outcome column, as the table shows it now (``failed, grading``), or None."""
        for line in self.screen().splitlines():
            match = ROW.match(line)
            if match and int(match.group(1)) == step:
                return match.group(4).strip()
        return None

    def shows(self, step: int, outcome: str) -> bool:
        return wait_until(lambda: self.status(step) == outcome, BOUND, interval=0.2) is not None


def descendants(pid: int) -> set[int]:
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), set()).add(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "TERM": "xterm-256color"}
    (tmp_path / "tmp").mkdir()
    term = Terminal(tmp_path / "tmux.sock", env)
    term.tmux("new-session", "-d", "-s", "watch", "-x", "120", "-y", "50", "bash --norc --noprofile")
    try:
        yield term
    finally:
        term.tmux("kill-server")


def test_watch_follows_files_and_cluster_and_leaves_nothing_running(tmp_path, terminal):
    with KwokCluster.for_lab("gpuop", name="tests-watch", workdir=tmp_path / "kwok") as cluster:
        root = tmp_path / "root"
        grading.solve("gpuop", cluster, root)
        gpulab = Path(sys.executable).with_name("gpulab")
        command = f"{gpulab} watch gpuop --lab-root={root} --kubeconfig={cluster.kubeconfig} --lab-seed=47"
        terminal.tmux("send-keys", "-t", "watch", command, "Enter")
        assert wait_until(lambda: "total: 100/100 points" in terminal.screen(), BOUND), terminal.screen()
        assert "seed 47 [the option --lab-seed] (replay with --lab-seed=47)" in terminal.screen()
        assert "lab gpuop · rubric" in terminal.screen() and "s ago" in terminal.screen()

        dropin = root / DROPIN
        solved = dropin.read_text()
        dropin.write_text(solved.replace("/usr/bin/nvidia-container-runtime", "/usr/bin/runc"))
        assert terminal.shows(2, "failed"), terminal.screen()
        assert "options.BinaryName" in terminal.screen()
        print(terminal.screen())  # step 2 failed, as the learner saw it
        dropin.write_text(solved)
        assert terminal.shows(2, "passed"), terminal.screen()

        cluster.kubectl(
            "patch", "daemonset", "nvidia-container-toolkit", "-n", "gpu-operator", "--type=merge",
            "-p", '{"spec":{"updateStrategy":{"rollingUpdate":{"maxUnavailable":2}}}}',
        )  # fmt: skip
        assert terminal.shows(8, "failed"), terminal.screen()
        assert "maxUnavailable" in terminal.screen()
        print(terminal.screen())  # the table as the learner saw it, for the report

        shell = int(terminal.tmux("display-message", "-p", "-t", "watch", "#{pane_pid}"))
        started = {pid: command for pid, command in running_commands().items() if pid in descendants(shell)}
        assert any("watch gpuop" in command for command in started.values()), started
        assert any("pytest_gpulab.cohort.warm" in command for command in started.values()), "its warm server"
        terminal.tmux("send-keys", "-t", "watch", "C-c")
        assert wait_until(lambda: not descendants(shell), BOUND), [
            running_commands().get(p) for p in descendants(shell)
        ]
        left = {pid: command for pid, command in running_commands().items() if started.get(pid) == command}
        assert not left, f"everything the watch started ended, even what left its process tree: {left}"
        assert "gpulab watch: stopped" in terminal.screen()
        assert not processes_mentioning(str(root)), "no grading, sandbox or script of the watch is left"
        assert not processes_mentioning(str(tmp_path / "tmp")), "no view or copy cluster is left"
        assert not list((tmp_path / "tmp").iterdir()), "no temporary folder is left"
        assert not processes_mentioning("watch gpuop"), "the watch itself (and its cluster watches) ended"


def test_sigint_during_a_grading_leaves_no_copy_cluster_sandbox_or_view(tmp_path):
    """gpunode's step 4 grades on a near-miss copy of the cluster: stopped while that copy is up, the watch's
    grading ends it, and its sandboxes and read-only views, before the watch ends."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    with KwokCluster.for_lab("gpunode", name="tests-watch-copy", workdir=tmp_path / "kwok") as cluster:
        root = tmp_path / "root"
        grading.solve("gpunode", cluster, root)
        gpulab = Path(sys.executable).with_name("gpulab")
        watching = subprocess.Popen(
            [str(gpulab), "watch", "gpunode", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}"],
            env={**os.environ, "TMPDIR": str(temporary)}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            copy = wait_until(
                lambda: processes_mentioning("gpulab-copy-") & processes_mentioning(str(temporary)), BOUND
            )
            assert copy, "the grading made its near-miss copy"
        finally:
            watching.send_signal(signal.SIGINT)
            out, errors = watching.communicate(timeout=BOUND)
        assert watching.returncode == 0, errors
        assert "gpulab watch: stopped" in errors
        assert "watching" in out
        assert not processes_mentioning(str(temporary)), "no copy cluster, view or sandbox is left"
        assert not processes_mentioning(str(root))
        assert not list(temporary.iterdir()), "no temporary folder is left"


def test_a_watch_per_kind_reports_changes_and_a_kind_served_later(tmp_path):
    """One watch per kind: a ConfigMap made is reported; a custom kind the cluster does not serve yet is watched
    once its CustomResourceDefinition is made, and an object made right after it is not missed."""
    changes: queue.Queue[Change] = queue.Queue()
    with KwokCluster.for_lab("gpuop", name="tests-watch-kinds", workdir=tmp_path / "kwok") as cluster:
        watch = ClusterWatch(str(cluster.kubeconfig), ["ConfigMap", "Node", "Widget"], changes.put)
        watch.start()
        try:
            cluster.kubectl("create", "configmap", "watched", "-n", "default", "--from-literal=a=1")
            cluster.kubectl("apply", "-f", "-", input=grading.WIDGET_CRD)
            cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.tests.gpulab.example")
            widget = "apiVersion: tests.gpulab.example/v1\nkind: Widget\nmetadata: {name: w}\n"
            cluster.kubectl("apply", "-f", "-", input=widget)
            seen = set()
            while Change(OBJECT, "w", "Widget") not in seen:
                seen.add(changes.get(timeout=BOUND))
            assert Change(OBJECT, "default/watched", "ConfigMap") in seen
            assert Change(OBJECT, "widgets.tests.gpulab.example", "CustomResourceDefinition") in seen
        finally:
            watch.stop()
        assert not any(kind.problem for kind in watch.watches)
        assert not [thread for thread in threading.enumerate() if thread.name.startswith("gpulab-watch-")]
