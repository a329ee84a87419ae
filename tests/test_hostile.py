"""Hostile input, one table: each learner file or script ends as a clean failure (or a clean run), bounded.

Files are read through ``LearnerFile`` as every grader reads them; scripts are run by the grader's
``ScriptRunner`` in the sandbox of this machine. Nothing outside a run's scratch directory may change.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile_scripts import fingerprint

from pytest_gpulab.grading.feedback import StepFailed
from pytest_gpulab.grading.learner import LearnerWork
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.sandbox import confine as sandbox
from pytest_gpulab.sandbox.script_result import ScriptResult

# CPU seconds of the reader's own thread, not wall time: a loaded machine does not add to it. The readers stop at
# 1 MiB, 1000 YAML documents and 200 000 values, which costs at most some seconds of CPU (5000 small documents, read
# before they are counted, are the dearest case: under 2 s here); a reader that spins takes minutes to hours.
READ_CPU_SECONDS = 30.0
READ_PEAK_BYTES = 64 * 1024 * 1024
READERS: dict[str, Callable] = {
    "toml": lambda f: f.toml(),
    "yaml": lambda f: f.objects(),
    "result": lambda f: f.key_values("READY"),
    "script": lambda f: f.code(),
}
NAMES = {"toml": "etc/config.toml", "yaml": "k8s/pod.yaml", "result": "out/result.txt", "script": "bin/check.sh"}


def sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with path.open("wb") as handle:
            handle.truncate(size)

    return make


def written(content: bytes) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_bytes(content)

    return make


def link(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def unreadable(path: Path) -> None:
    path.write_text("READY=3\n")
    path.chmod(0)


def alias_bomb() -> bytes:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{n}: &a{n} [*a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}]" for n in range(1, 12)]
    return ("\n".join(lines) + "\n").encode()


def many_objects(count: int) -> bytes:
    doc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{n}\n"
    return "---\n".join(doc.format(n=n) for n in range(count)).encode()


COMMON: dict[str, Callable[[Path], None]] = {
    "garbage-bytes": written(os.urandom(4096).replace(b"\n", b"")),
    "invalid-utf8": written(b"READY=\xff\xfe3\n"),
    "100-mb": sparse(100 * 1024 * 1024),
    "symlink-dev-zero": link("/dev/zero"),
    "symlink-etc-shadow": link("/etc/shadow"),
    "symlink-out-of-root": link("../../outside.txt"),
    "fifo": lambda path: os.mkfifo(path),
    "directory": lambda path: path.mkdir(),
    "empty": written(b""),
    "unreadable": unreadable,
}
SPECIFIC: dict[str, dict[str, Callable[[Path], None]]] = {
    "toml": {
        "duplicate-keys": written(b"version = 2\nversion = 3\n"),
        "crlf": written(b"version = 2\r\n[x]\r\ny = 1\r\n"),
    },
    "yaml": {
        "alias-bomb": written(alias_bomb()),
        "deep-nesting": written(b"[" * 5000 + b"]" * 5000),
        "thousands-of-documents": written(many_objects(5000)),
        "crlf": written(b"apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\n"),
    },
    "result": {"crlf": written(b"READY=3\r\n"), "duplicate-keys": written(b"READY=3\nREADY=2\n")},
    "script": {"crlf": written(b"#!/bin/sh\r\necho OK\r\n")},
}
# Read cleanly: CRLF is folded, and an empty TOML or YAML file is an empty document the step then grades.
BENIGN = {("toml", "crlf"), ("yaml", "crlf"), ("result", "crlf"), ("script", "crlf")}
BENIGN |= {("toml", "empty"), ("yaml", "empty"), ("script", "empty")}
FILE_CASES = [(kind, case) for kind in READERS for case in [*COMMON, *SPECIFIC[kind]]]


def read(kind: str, learner_file) -> str:
    """ "read", or the sentence the reader failed with."""
    try:
        READERS[kind](learner_file)
    except StepFailed as failure:
        return failure.message
    return "read"


@pytest.mark.parametrize(("kind", "case"), FILE_CASES, ids=[f"{k}-{c}" for k, c in FILE_CASES])
def test_a_hostile_file_is_a_clean_failure_in_bounded_time_and_memory(tmp_path, kind, case):
    root = tmp_path / "lab"
    path = root / NAMES[kind]
    path.parent.mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("READY=3\nsecret\n")
    {**COMMON, **SPECIFIC[kind]}[case](path)
    learner_file = LearnerWork(root).file(NAMES[kind])
    started = time.thread_time()  # the reader's own CPU time: a busy machine does not make it slow
    outcome = read(kind, learner_file)
    assert time.thread_time() - started < READ_CPU_SECONDS, "the reader spun on it"
    tracemalloc.start()  # a second read, for its memory: tracing slows it down
    try:
        read(kind, learner_file)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < READ_PEAK_BYTES
    if (kind, case) in BENIGN or (case == "unreadable" and os.geteuid() == 0):
        return
    assert outcome != "read", f"{case} was read as if it were a {kind} file"
    assert NAMES[kind] in outcome and "secret" not in outcome and "root:" not in outcome, outcome


@dataclass(frozen=True)
class Hostile:
    script: str
    survives: Callable[[ScriptRunner, Path], bool] = lambda runner, work: True


@pytest.fixture
def runner(tmp_path):
    lab = tmp_path / "lab"
    (lab / "bin").mkdir(parents=True)
    (tmp_path / "other-learner").mkdir()
    (tmp_path / "other-learner" / "answers.txt").write_text("the other learner's answers\n")
    (lab / "out").mkdir()
    (lab / "out" / "merge.txt").write_text("MAIN_RUNTIMES=runc\n")
    scripts = ScriptRunner(tmp_path / "work", 3.0, lambda: None, lab_root=lab, sandbox=sandbox.probe())
    yield scripts
    scripts.close()


GRADER = Path(__file__).resolve().parents[1] / "graders"
SCRIPT_CASES = {
    "hang": "#!/bin/sh\nwhile :; do :; done\n",
    "sleep-past-the-timeout": "#!/bin/sh\nsleep 1000\n",
    "flood-output": "#!/bin/sh\nyes flood\n",
    # The script outlives its bomb's first second, so the process limit, not the end of the run, stops it.
    "fork-repeatedly": "#!/bin/bash\nf() {{ f | f & }}; f\nsleep 2\n",
    "kill-the-grader": "#!/bin/sh\nkill -9 $PPID\nkill -9 {grader}\n",
    "kill-the-process-group": "#!/bin/sh\nkill -9 0\n",
    "setsid-and-escape": "#!/bin/sh\nsetsid sleep 1000 >/dev/null 2>&1 < /dev/null &\necho escaped\n",
    "write-the-report": "#!/bin/sh\necho '{{\"earned\": 100}}' > {report}\n",
    "write-the-lab-root": "#!/bin/sh\necho MAIN_RUNTIMES=nvidia > {lab}/out/merge.txt; rm -f {lab}/out/merge.txt\n",
    "write-the-graders": "#!/bin/sh\ntouch {graders}/step9_free_points.py\n",
    "write-tmp": "#!/bin/sh\necho junk > /tmp/gpulab-hostile-junk\n",
    "read-another-learner": "#!/bin/sh\ncat {other}/answers.txt\n",
    "exit-by-signal": "#!/bin/sh\nkill -SEGV $$\n",
    "huge-file": "#!/bin/sh\nhead -c 200000000 /dev/zero > big\n",
}


ENDINGS = {
    "hang": {"timed out"},
    "sleep-past-the-timeout": {"timed out"},
    "flood-output": {"flooded"},
    "fork-repeatedly": {"exited", "timed out", "stopped at a limit"},  # where the grader counts its processes
}  # how each case may end; "exited" for every other


def ending(result: ScriptResult) -> str:
    """Why a run ended: "timed out", "flooded" or "stopped at a limit" (the runner stopped it), "exited" (it ended
    itself, the exit code kept), "killed" (by a signal), or "not started"."""
    if result.start_error is not None:
        return "not started"
    if result.timed_out:
        return "timed out"
    if result.flooded:
        return "flooded"
    if result.limit is not None:
        return "stopped at a limit"
    return "exited" if result.exit_code is not None else "killed"


def scripts_processes(uid: int | None = None) -> list[str]:
    """Every process of ``uid`` (by default, of every uid a root grader's scripts run as): none may outlive
    its run. A run's own uid keeps the check to it, whatever else runs on the machine."""
    listed = subprocess.run(["ps", "-e", "-o", "uid=,pid=,args="], capture_output=True, text=True)
    uids = sandbox.RUN_UIDS if uid is None else (uid,)
    return [line for line in listed.stdout.splitlines() if line.split() and int(line.split()[0]) in uids]


@pytest.mark.skipif(not sandbox.probe().namespaces, reason="this machine cannot make namespaces")
@pytest.mark.parametrize("case", list(SCRIPT_CASES))
def test_a_hostile_script_ends_in_its_own_run(runner, tmp_path, case):
    lab = runner.lab_root
    report = tmp_path / "report.json"
    report.write_text('{"earned": 0}\n')
    other = tmp_path / "other-learner"
    text = SCRIPT_CASES[case].format(grader=os.getpid(), report=report, lab=lab, graders=GRADER, other=other)
    script = lab / "bin" / "hostile.sh"
    script.write_text(text)
    script.chmod(0o755)
    before = fingerprint(lab, report, GRADER, other)
    run = runner.run(script)
    result = run.result
    assert result.start_error is None, result.describe()
    # It ended, and why: the runner stopped only the scripts that would not end by themselves (at their timeout,
    # or at their flood of output); every other one ended itself (the bomb's perhaps at its timeout on a busy machine).
    assert ending(result) in ENDINGS.get(case, {"exited"}), (ending(result), result)
    assert fingerprint(lab, report, GRADER, other) == before
    assert not Path("/tmp/gpulab-hostile-junk").exists()
    assert not (GRADER / "step9_free_points.py").exists()
    assert "other learner" not in result.stdout
    # a killed process is gone once its parent reaps it: a moment on a busy machine (seen as "[hostile.sh]")
    assert run.user is None or wait_until(lambda: scripts_processes(run.user) == [], 60), scripts_processes(run.user)
    # Writes that land in a throwaway blank (the folder above the lab root, /tmp) end well; nothing outside changes.
    harmless_here = ("setsid-and-escape", "read-another-learner", "write-tmp", "fork-repeatedly", "write-the-report")
    assert result.exit_code != 0 or case in harmless_here, result
    if case == "fork-repeatedly":  # stopped by the process limit, not by the machine
        assert "fork" in result.stderr and "Resource temporarily unavailable" in result.stderr, result.stderr[:500]
    if case in ("hang", "sleep-past-the-timeout"):
        assert result.timed_out
    if case == "flood-output":
        assert result.flooded
        assert len(result.stdout) <= 64 * 1024


def test_scripts_run_as_a_uid_of_their_own_without_seeing_the_grader(runner):
    script = runner.lab_root / "bin" / "who.sh"
    script.write_text(f"#!/bin/sh\nid -u\nkill -0 {os.getpid()} 2>/dev/null && echo grader-visible\nls /proc\n")
    script.chmod(0o755)
    result = runner.run(script).result
    probe = sandbox.probe()
    if probe.run_uids is not None:
        assert int(result.stdout.splitlines()[0]) in probe.run_uids
    if probe.namespaces:
        assert "grader-visible" not in result.stdout
        assert str(os.getpid()) not in result.stdout.split()


def test_without_namespaces_scripts_still_run_and_the_gap_is_said(tmp_path):
    weak = sandbox.Sandbox("none", missing=("no PID or mount namespace",))
    lab = tmp_path / "lab"
    (lab / "bin").mkdir(parents=True)
    script = lab / "bin" / "ok.sh"
    script.write_text("#!/bin/sh\necho OK\n")
    script.chmod(0o755)
    runner = ScriptRunner(tmp_path / "work", 3.0, lambda: None, lab_root=lab, sandbox=weak)
    assert runner.run(script).result.stdout == "OK\n"
    assert "reduced protection: no PID or mount namespace" in weak.describe()


def test_a_signal_to_the_sandbox_ends_every_process_it_started(runner):
    script = runner.lab_root / "bin" / "bg.sh"
    script.write_text("#!/bin/sh\n(trap '' TERM HUP; sleep 1000) &\nsetsid sleep 1000 &\nsleep 1000\n")
    script.chmod(0o755)
    runner.timeout = 1.0
    run = runner.run(script)
    assert run.result.timed_out
    assert not any("sleep 1000" in line for line in scripts_processes(run.user))


def test_a_private_lab_root_and_an_owner_only_script_still_run(runner):
    """A lab root made by mkdtemp (0700) and a script made executable with chmod u+x (0744)."""
    runner.lab_root.chmod(0o700)
    script = runner.lab_root / "bin" / "mine.sh"
    script.write_text('#!/bin/sh\ncat ../lab/out/merge.txt 2>/dev/null; cat "$1"\n')
    script.chmod(0o744)
    result = runner.run(script, str(runner.lab_root / "out" / "merge.txt")).result
    assert result.exit_code == 0 and result.stdout.endswith("MAIN_RUNTIMES=runc\n"), result


def test_a_lab_root_of_hostile_files_is_graded_step_by_step_and_reported(pytester, tmp_path):
    """Every file gpuop reads made hostile at once, and no cluster: each step ends cleanly, the report is whole."""
    root = tmp_path / "learner"
    hostile = {
        "etc/containerd/config.toml": link("/dev/zero"),
        "etc/containerd/conf.d/99-nvidia.toml": lambda path: os.mkfifo(path),
        "out/merge.txt": written(os.urandom(2048)),
        "bin/check-runtime.sh": written(b"#!/bin/bash\nf() { f | f & }; f\n"),
        "k8s/runtimeclass.yaml": written(alias_bomb()),
        "k8s/gpu-pod.yaml": written(b"[" * 5000 + b"]" * 5000),
        "k8s/time-slicing.yaml": link("/etc/shadow"),
        "k8s/toolkit-ds.yaml": written(many_objects(5000)),
        "out/unscheduled.txt": sparse(100 * 1024 * 1024),
        "out/node-gpu.txt": lambda path: path.mkdir(),
        "out/slots.txt": written(b"\xff\xfe\x00"),
        "out/rollout.txt": link("../../outside.txt"),
    }
    (tmp_path / "outside.txt").write_text("READY=3\nsecret\n")
    for relative, make in hostile.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        make(path)
    (root / "bin" / "check-runtime.sh").chmod(0o755)
    report = tmp_path / "grading.json"
    graded = pytester.runpytest_subprocess(
        "--lab=gpuop", f"--lab-root={root}", "--kubeconfig=/nonexistent", f"--gpulab-report={report}"
    )
    assert graded.ret == pytest.ExitCode.TESTS_FAILED, graded.outlines[-20:]  # ended as a grading with failures
    data = json.loads(report.read_text())
    assert data["complete"] is True
    assert [s["outcome"] for s in data["steps"]] == ["failed"] * 4 + ["error"] * 4
    # each step ended on its own finding, none by its time limit (the sign of a hostile file that hung it)
    assert not [s for s in data["steps"] if "took longer than" in (s.get("message") or "")], data["steps"]
    text = json.dumps(data)
    assert "secret" not in text
    assert "root:" not in text
    assert "Traceback" not in text


def test_a_script_that_does_not_read_the_cluster_reaches_nothing_on_the_network(runner):
    """The lab cluster's etcd listens on plain HTTP: a script given no cluster must not reach it, nor anything."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        script = runner.lab_root / "bin" / "net.sh"
        script.write_text(
            f'#!/bin/bash\necho "KUBECONFIG=$KUBECONFIG"\n'
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo unreachable\n"
        )
        script.chmod(0o755)
        result = runner.run(script).result
    assert result.stdout.splitlines()[0] == "KUBECONFIG="
    expected = "unreachable" if runner.sandbox is not None and runner.sandbox.namespaces else "reached"
    assert result.stdout.splitlines()[-1] == expected, result
