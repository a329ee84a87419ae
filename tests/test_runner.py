"""run_script: bounded, isolated runs of learner scripts."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.sandbox.runner import ScriptResult, run_script


def write(path: Path, text: str, executable: bool = True) -> Path:
    path.write_text(text)
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    d = tmp_path / "scratch"
    d.mkdir()
    return d


def ended(pid: int) -> bool:
    """Whether the process has ended (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def gone(pid: int, within: float = 60.0) -> bool:
    """Whether the process ends within ``within`` s: a bounded wait, generous on a loaded machine."""
    return bool(wait_until(lambda: ended(pid), within, interval=0.05))


def test_exit_codes_and_output(tmp_path, scratch):
    script = write(tmp_path / "s.sh", "#!/bin/bash\necho out\necho err >&2\nexit 3\n")
    result = run_script(script, cwd=scratch)
    assert isinstance(result, ScriptResult)
    assert result.exit_code == 3
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert result.stdout_lines() == ["out"]
    assert not (result.timed_out)
    assert not (result.flooded)
    assert not (result.ran_with_bash)
    assert result.describe() == "exited 3"
    assert result.command == [str(script)]
    ok = run_script(write(tmp_path / "ok.sh", "#!/bin/sh\nexit 0\n"), cwd=scratch)
    assert ok.exit_code == 0
    assert ok.describe() == "exited 0"


def test_args_are_passed(tmp_path, scratch):
    script = write(tmp_path / "s.sh", '#!/bin/bash\nprintf "%s\\n" "$@"\n')
    result = run_script(script, ["a b", "--x", "ç"], cwd=scratch)
    assert result.stdout_lines() == ["a b", "--x", "ç"]


def test_timeout_kills_script_and_background_child(tmp_path, scratch):
    script = write(
        tmp_path / "hang.sh",
        "#!/bin/bash\nsleep 1000 &\necho $! > child.pid\necho started\nsleep 1000\n",
    )
    result = run_script(script, cwd=scratch, timeout=1)
    assert result.timed_out
    assert result.exit_code is None
    assert not result.flooded
    assert result.stdout == "started\n"
    assert result.describe() == "was stopped after 1 s (timeout)"
    assert gone(int((scratch / "child.pid").read_text()))


def test_background_child_does_not_hang_a_finished_script(tmp_path, scratch):
    script = write(
        tmp_path / "bg.sh",
        "#!/bin/bash\nsleep 1000 &\necho $! > child.pid\necho done\nexit 0\n",
    )
    result = run_script(script, cwd=scratch, timeout=10)
    assert result.exit_code == 0
    assert not result.timed_out  # it ended when the script did, not at the timeout
    assert result.stdout == "done\n"
    assert gone(int((scratch / "child.pid").read_text()))


@pytest.mark.parametrize("redirect", ["", ">&2"])
def test_flood_is_killed_and_flagged(tmp_path, scratch, redirect):
    script = write(tmp_path / "flood.sh", f"#!/bin/bash\nyes {redirect}\n")
    result = run_script(script, cwd=scratch, timeout=10, output_limit=1000)
    assert result.flooded
    assert not result.timed_out
    assert result.exit_code is None
    assert result.describe() == "was stopped: it printed more than 1 MiB"
    text = result.stderr if redirect else result.stdout
    assert len(text.encode()) == 1000
    assert text.startswith("y\ny\n")
    assert result.stdout_bytes + result.stderr_bytes > 1024 * 1024


def test_output_is_truncated_but_counted(tmp_path, scratch):
    script = write(tmp_path / "s.sh", "#!/bin/bash\nhead -c 10000 /dev/zero | tr '\\0' x\n")
    result = run_script(script, cwd=scratch, output_limit=100)
    assert result.exit_code == 0
    assert not result.flooded
    assert result.stdout == "x" * 100
    assert result.stdout_bytes == 10000
    assert result.stdout_truncated


def test_invalid_utf8_is_replaced(tmp_path, scratch):
    script = write(tmp_path / "s.sh", "#!/bin/bash\nprintf 'a\\377b\\n'\n")
    assert run_script(script, cwd=scratch).stdout == "a\ufffdb\n"


def test_stdin_is_closed(tmp_path, scratch):
    script = write(tmp_path / "cat.sh", "#!/bin/bash\ncat\necho after\n")
    result = run_script(script, cwd=scratch, timeout=5)
    assert not result.timed_out  # cat saw the end of its input: it did not wait out the timeout
    assert result.exit_code == 0
    assert result.stdout == "after\n"


def test_non_executable_script_runs_with_bash(tmp_path, scratch):
    script = write(tmp_path / "noexec.sh", 'echo via $0 "$1"\n', executable=False)
    result = run_script(script, ["arg"], cwd=scratch)
    assert result.ran_with_bash
    assert Path(result.command[0]).name == "bash"
    assert result.command[1:] == [str(script), "arg"]
    assert result.exit_code == 0
    assert result.stdout == f"via {script} arg\n"


def test_executable_script_without_shebang_runs_with_bash(tmp_path, scratch):
    script = write(tmp_path / "nobang.sh", "echo fine\n")
    result = run_script(script, cwd=scratch)
    assert result.ran_with_bash
    assert result.exit_code == 0
    assert result.stdout == "fine\n"


def test_crlf_shebang_is_explained(tmp_path, scratch):
    script = write(tmp_path / "crlf.sh", "#!/bin/bash\r\necho hi\r\n")
    result = run_script(script, cwd=scratch)
    assert result.exit_code == 126
    assert "CRLF" in result.describe()


def test_popen_permission_error_is_a_result(tmp_path, scratch, monkeypatch):
    # As root a PermissionError is hard to provoke for real; whatever Popen
    # raises, run_script reports it instead of raising.
    def refuse(cmd, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", cmd[0])

    monkeypatch.setattr(subprocess, "Popen", refuse)
    # Executable: the direct exec fails with EACCES, then the bash fallback too.
    script = write(tmp_path / "s.sh", "#!/bin/bash\necho hi\n")
    result = run_script(script, cwd=scratch)
    assert result.start_error is not None
    assert "Permission denied" in result.start_error
    assert result.exit_code is None
    assert result.ran_with_bash
    assert result.describe().startswith("could not be started: Permission denied")
    assert not (result.timed_out)
    assert not (result.flooded)
    assert result.stdout == ""
    # Not executable: only the bash path is tried.
    plain = write(tmp_path / "plain.sh", "echo hi\n", executable=False)
    result = run_script(plain, cwd=scratch)
    assert result.exit_code is None
    assert result.ran_with_bash
    assert result.describe().startswith("could not be started: Permission denied")


def test_bash_that_cannot_run_is_a_result(tmp_path, scratch):
    # The bash fallback finds a "bash" that cannot be executed (no #! line).
    tools = tmp_path / "tools"
    tools.mkdir()
    write(tools / "bash", "\x7fnot an executable\n")
    script = write(tmp_path / "plain.sh", "echo hi\n", executable=False)
    result = run_script(script, cwd=scratch, extra_env={"PATH": str(tools)})
    assert result.ran_with_bash
    assert result.command[0] == str(tools / "bash")
    assert result.exit_code is None
    assert result.start_error is not None
    assert str(tools / "bash") in result.start_error
    assert result.describe() == f"could not be started: {result.start_error}"


def test_missing_script_raises(tmp_path, scratch):
    with pytest.raises(FileNotFoundError):
        run_script(tmp_path / "nope.sh", cwd=scratch)
    with pytest.raises(FileNotFoundError):
        run_script(tmp_path, cwd=scratch)


def test_path_prefix_and_environment(tmp_path, scratch, monkeypatch):
    monkeypatch.setenv("GPULAB_TEST_MARKER", "kept")
    tools = tmp_path / "tools"
    tools.mkdir()
    write(tools / "hello-tool", "#!/bin/sh\necho hello from tool\n")
    script = write(
        tmp_path / "env.sh",
        "#!/bin/bash\n"
        'echo "PATH=$PATH"\n'
        'echo "HOME=$HOME"\n'
        'echo "MARKER=$GPULAB_TEST_MARKER"\n'
        'echo "EXTRA=$EXTRA_VAR"\n'
        "hello-tool\n",
    )
    before = dict(os.environ)
    result = run_script(script, cwd=scratch, path_prefix=[tools], extra_env={"EXTRA_VAR": "x y"})
    assert result.exit_code == 0, result.stderr
    lines = dict(line.split("=", 1) for line in result.stdout_lines()[:4])
    assert lines["PATH"] == f"{tools}{os.pathsep}{os.environ['PATH']}"
    assert lines["HOME"] == os.environ["HOME"]
    assert lines["HOME"]
    assert lines["MARKER"] == "kept"
    assert lines["EXTRA"] == "x y"
    assert result.stdout_lines()[4] == "hello from tool"
    assert dict(os.environ) == before  # the grader's own environment is untouched


def test_cwd_is_the_scratch_dir(tmp_path, scratch):
    script = write(tmp_path / "pwd.sh", "#!/bin/bash\npwd -P\ntouch made-here\n")
    result = run_script(script, cwd=scratch)
    assert result.stdout.strip() == str(scratch.resolve())
    assert (scratch / "made-here").exists()
    assert not (tmp_path / "made-here").exists()


def test_relative_script_path(tmp_path, scratch, monkeypatch):
    write(tmp_path / "rel.sh", "#!/bin/bash\necho rel\n")
    monkeypatch.chdir(tmp_path)
    assert run_script(Path("rel.sh"), cwd=scratch).stdout == "rel\n"


def test_killed_by_signal(tmp_path, scratch):
    script = write(tmp_path / "kill.sh", "#!/bin/bash\nkill -KILL $$\n")
    result = run_script(script, cwd=scratch)
    assert result.exit_code is None
    assert not result.timed_out
    assert not result.flooded
    assert result.describe() == "was killed by SIGKILL"


def test_runs_the_fake_containerd(tmp_path, scratch):
    from pytest_gpulab.sandbox.containerd import FakeContainerd

    fake = FakeContainerd(tmp_path / "fake")
    script = write(
        tmp_path / "check-runtime.sh",
        "#!/bin/bash\ncontainerd config dump | grep -q containerd.runtimes.nvidia\n",
    )
    fake.serve_dump("v3-runc-nvidia")
    assert run_script(script, cwd=scratch, path_prefix=[fake.bin_dir]).exit_code == 0
    fake.serve_dump("v3-runc-only")
    assert run_script(script, cwd=scratch, path_prefix=[fake.bin_dir]).exit_code == 1
    assert fake.asked_for_config_dump()


@pytest.mark.timeout(120)  # a run_script that waited for the escaped child would hang here
def test_child_escaping_the_group_does_not_hang(tmp_path, scratch):
    # `setsid` puts the child outside the process group we kill; it keeps the
    # pipes open, and run_script must still return after a bounded wait: while the child still runs.
    script = write(
        tmp_path / "esc.sh",
        "#!/bin/bash\nsetsid sh -c 'echo $$ > child.pid; exec sleep 1000' &\n"
        "while [ ! -s child.pid ]; do sleep 0.01; done\necho hi\n",
    )
    result = run_script(script, cwd=scratch, timeout=10)
    child = int((scratch / "child.pid").read_text())
    try:
        assert not ended(child), "the escaped child must still hold the pipes when run_script returns"
        assert result.exit_code == 0
        assert not result.timed_out  # it ended when the script did
        assert result.stdout == "hi\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_run_s_environment_and_client_are_made_while_pytest_sets_and_unsets_a_variable(monkeypatch):
    """Runs start in threads while pytest sets and unsets PYTEST_CURRENT_TEST: ``dict(os.environ)`` and the
    kubernetes client's Configuration (urllib's getproxies) raised KeyError then (a grader error, now and then)."""
    from pytest_gpulab.cluster.environ import client_configuration, environ_now

    monkeypatch.setenv("GPULAB_TOGGLED", "1")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            os.environ.pop("GPULAB_TOGGLED", None)
            os.environ["GPULAB_TOGGLED"] = "1"

    toggler = threading.Thread(target=toggle)
    toggler.start()
    try:
        copies = [environ_now() for _ in range(3000)]
        configurations = [client_configuration() for _ in range(300)]
    finally:
        stop.set()
        toggler.join()
    assert all(copy.get("GPULAB_TOGGLED") in (None, "1") and "PATH" in copy for copy in copies)
    assert {(c.proxy, c.no_proxy) for c in configurations} == {("http://proxy.example:3128", "127.0.0.1,localhost")}


def test_the_sandbox_is_tried_once_however_many_threads_ask_at_once(monkeypatch):
    """The plugin tries the sandbox in the background while the first checks run; a check that needs it
    meanwhile waits for that try instead of making its own."""
    from pytest_gpulab.sandbox import confine

    tries = []
    real = confine._works

    def counted(candidate: confine.Sandbox) -> bool:
        tries.append(candidate)
        return real(candidate)

    monkeypatch.setattr(confine, "_works", counted)
    confine._probe.cache_clear()
    start = threading.Barrier(4)
    found: list[object] = []

    def ask() -> None:
        start.wait(timeout=60)
        found.append(confine.probe())

    askers = [threading.Thread(target=ask) for _ in range(4)]
    try:
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(timeout=60)
    finally:
        confine._probe.cache_clear()
    assert len(found) == 4
    assert all(sandbox is found[0] for sandbox in found)
    assert len(tries) <= 1  # none where bubblewrap or its tools are missing
