"""Gradings forked from a warm server (``pytest_gpulab/cohort/warm.py``) are the gradings a new interpreter
would have run: the same report, environment, directory, input, output and exit status; stopped at their
timeout; and gone, with their server, when the caller dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpulab.cohort.warm import COLD, WarmGradings
from pytest_gpulab.labs.waiting import wait_until

# A test module that records how it was run: whether its interpreter had the client imported before pytest
# collected it (only a warm server preloads it), its parent, directory, input and one variable.
PROBE = """
import json, os, sys
WARM = "kubernetes.client" in sys.modules

def test_probe():
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    record = {"warm": WARM, "parent": os.getppid(), "pid": os.getpid(), "cwd": os.getcwd(),
              "stdin": sys.stdin.read(), "variable": os.environ.get("PROBE_VARIABLE"),
              "sockets": [fd for fd in fds if fd.startswith("socket:")]}
    print("PROBE " + json.dumps(record))
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(record, out)
    if os.environ.get("PROBE_SLEEP"):
        import time
        time.sleep(float(os.environ["PROBE_SLEEP"]))
    assert not os.environ.get("PROBE_FAIL"), "failed as asked"
"""


@pytest.fixture
def probe(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "test_probe.py").write_text(PROBE)
    env = {**os.environ, "PROBE_VARIABLE": "from-the-request", "PROBE_OUT": str(tmp_path / "probe.json")}
    return run, env, tmp_path / "probe.json"


ARGS = ["-p", "no:cacheprovider", "-s", "test_probe.py"]


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_warm_grading_is_a_process_of_its_own_with_the_request_s_environment(probe):
    run, env, record = probe
    with WarmGradings() as gradings:
        status = gradings.run(ARGS, cwd=run, env=env, output=run / "output.txt", timeout=60)
        failed = gradings.run(ARGS, cwd=run, env={**env, "PROBE_FAIL": "1"}, output=run / "failed.txt", timeout=60)
    seen = json.loads(record.read_text())
    assert (status, failed) == (0, 1)
    assert seen["warm"] and seen["parent"] != os.getpid(), seen  # forked from the server, not started by us
    assert (seen["cwd"], seen["stdin"], seen["variable"]) == (str(run), "", "from-the-request")
    assert seen["sockets"] == [], seen  # neither the server's socket nor its reply's: it cannot ask for a grading
    assert "PROBE " in (run / "output.txt").read_text()
    assert "failed as asked" in (run / "failed.txt").read_text()
    assert "warning" not in (run / "output.txt").read_text()  # none of pytest's, on modules it could not rewrite


def test_a_grading_whose_python_starts_differently_runs_cold(probe):
    run, env, record = probe
    with WarmGradings() as gradings:
        status = gradings.run(ARGS, cwd=run, env={**env, "PYTHONPATH": str(run)}, output=run / "out.txt", timeout=60)
    seen = json.loads(record.read_text())
    assert status == 0 and not seen["warm"] and seen["parent"] == os.getpid(), seen


def test_a_grading_out_of_time_is_stopped(probe):
    run, env, record = probe
    with WarmGradings() as gradings, pytest.raises(subprocess.TimeoutExpired):
        gradings.run(ARGS, cwd=run, env={**env, "PROBE_SLEEP": "60"}, output=run / "out.txt", timeout=3)
    pid = json.loads(record.read_text())["pid"]
    assert wait_until(lambda: not running(pid), 60), f"the grading {pid} still runs"


CALLER = """
import os, sys
from pathlib import Path
from pytest_gpulab.cohort.warm import WarmGradings
run = Path(sys.argv[1])
with WarmGradings() as gradings:
    print(gradings.server_pid, flush=True)
    gradings.run(["-p", "no:cacheprovider", "-s", "test_probe.py"], cwd=run, env={**os.environ, "PROBE_SLEEP": "120"},
                 output=run / "out.txt", timeout=600)
"""


def test_a_caller_that_dies_takes_its_gradings_and_the_server_with_it(probe):
    run, env, record = probe
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(run)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        server = int(caller.stdout.readline())  # type: ignore[union-attr]
        assert wait_until(record.exists, 60), (run / "out.txt").read_text()
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    grading = json.loads(record.read_text())["pid"]
    assert wait_until(lambda: not running(grading) and not running(server), 60), (grading, server)


def test_cold_gradings_are_new_interpreters(probe):
    run, env, record = probe
    assert COLD.run(ARGS, cwd=run, env=env, output=run / "out.txt", timeout=60) == 0
    seen = json.loads(record.read_text())
    assert not seen["warm"]
    assert seen["parent"] == os.getpid()


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""
READS_KUBECONFIG = """
import os
from pytest_gpulab.cluster.transport import Transport

def test_default_kubeconfig():
    with open(os.environ["PROBE_OUT"], "w") as out:
        out.write(Transport(None).host)
"""


def test_a_warm_grading_reads_its_own_kubeconfig_not_the_one_the_server_started_with(probe, monkeypatch):
    """The client keeps KUBECONFIG as it was when imported: the server's, not the grading's."""
    run, env, record = probe
    (run / "test_probe.py").write_text(READS_KUBECONFIG)
    for port in (1001, 1002):
        (run / f"kubeconfig-{port}").write_text(KUBECONFIG % port)
    monkeypatch.setenv("KUBECONFIG", str(run / "kubeconfig-1001"))
    with WarmGradings() as gradings:
        grading_env = {**env, "KUBECONFIG": str(run / "kubeconfig-1002")}
        assert gradings.run(ARGS, cwd=run, env=grading_env, output=run / "out.txt", timeout=60) == 0
    assert record.read_text() == "https://127.0.0.1:1002", (run / "out.txt").read_text()
