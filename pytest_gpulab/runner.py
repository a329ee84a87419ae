"""Run an untrusted learner script, bounded in time and output.

``run_script()`` starts the script in its own session (so the whole process
group can be killed), with stdin closed, a scratch working directory, a copy
of the grader's environment and chosen directories put first on PATH. Output
is drained by reader threads that keep only the first ``output_limit`` bytes
of each stream; when the script runs past ``timeout`` seconds or prints more
than ``kill_after_bytes`` in all, its process group is killed. Every wait is
bounded, so a script that leaves a background child holding the pipes open
cannot hang the grader.

Usable without pytest.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["ScriptResult", "run_script"]

_CHUNK = 64 * 1024
_POLL = 0.02  # how often the main loop looks at the process, seconds
_KILL_WAIT = 5.0  # bounded wait for a SIGKILLed process to be reaped
_DRAIN_WAIT = 1.5  # bounded wait for the pipes to reach EOF once the group is gone


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} bytes"


@dataclass
class ScriptResult:
    command: list[str]
    exit_code: int | None  # None when killed (by us or by a signal)
    stdout: str
    stderr: str
    timed_out: bool
    flooded: bool
    ran_with_bash: bool
    duration: float
    timeout: float = 20.0
    kill_after_bytes: int = 1024 * 1024
    stdout_bytes: int = 0  # bytes the script printed, kept or not
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    signal: int | None = None  # the signal that ended it, if it was not us
    start_error: str | None = None  # the script could not be started at all

    def describe(self) -> str:
        """A short human summary: "exited 1", "was stopped after 20 s (timeout)"."""
        if self.start_error is not None:
            return f"could not be started: {self.start_error}"
        if self.timed_out:
            return f"was stopped after {self.timeout:g} s (timeout)"
        if self.flooded:
            return f"was stopped: it printed more than {_human_bytes(self.kill_after_bytes)}"
        if self.exit_code is not None:
            return f"exited {self.exit_code}"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"was killed by {name}"
        return "was killed"

    def stdout_lines(self) -> list[str]:
        return self.stdout.splitlines()


class _Stream:
    """Drains one pipe: keeps the first ``limit`` bytes, counts the rest."""

    def __init__(self, pipe, limit: int, budget: "_Budget", stop: threading.Event):
        self.pipe = pipe
        self.limit = limit
        self.budget = budget
        self.stop = stop
        self.kept = bytearray()
        self.total = 0
        self.eof = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        fd = self.pipe.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while not self.stop.is_set():
                if not poller.poll(100):
                    continue
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    self.eof = True
                    return
                room = self.limit - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.total += len(chunk)
                self.budget.spend(len(chunk))
        except (OSError, ValueError):
            # The pipe was closed under us after a bounded wait gave up.
            return

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", errors="replace")


class _Budget:
    """Total output of both streams; sets ``flood`` past the allowance."""

    def __init__(self, allowance: int, flood: threading.Event):
        self.allowance = allowance
        self.flood = flood
        self.spent = 0
        self.lock = threading.Lock()

    def spend(self, n: int) -> None:
        with self.lock:
            self.spent += n
            if self.spent > self.allowance:
                self.flood.set()


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int) -> bool:
    """Whether the process has ended, without reaping it (its pid, and so its
    process group id, stays reserved while it is a zombie)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _shebang(script: Path) -> str | None:
    try:
        with open(script, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].rstrip(b"\n").decode("utf-8", errors="replace").strip(" \t")


def _start_reason(exc: BaseException, script: Path) -> str:
    """Why starting failed, naming the file at fault when it is not the script."""
    if not isinstance(exc, OSError):
        return str(exc) or type(exc).__name__
    reason = exc.strerror or str(exc)
    if exc.filename is not None and str(exc.filename) != str(script):
        reason += f" ({exc.filename})"
    return reason


def run_script(
    script: Path,
    args: Sequence[str] = (),
    *,
    cwd: Path,
    path_prefix: Sequence[Path] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 20,
    output_limit: int = 64 * 1024,
    kill_after_bytes: int = 1024 * 1024,
) -> ScriptResult:
    """Run ``script`` with ``args`` and return what happened.

    A script without the exec bit is run as ``bash script args...``
    (``ran_with_bash``), as is an executable one without a ``#!`` line.
    A script that cannot be started (no permission, a missing ``#!``
    interpreter, no bash...) does not raise: the result has ``start_error``
    set and ``describe()`` says "could not be started: ...".
    Raises FileNotFoundError when the script does not exist (or is not a
    file) and NotADirectoryError when ``cwd`` is not a directory.
    """
    script = Path(os.path.abspath(script))
    if not script.exists():
        raise FileNotFoundError(errno.ENOENT, "no such script", str(script))
    if not script.is_file():
        raise FileNotFoundError(errno.ENOENT, "not a regular file", str(script))
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "scratch directory missing", str(cwd))

    env = dict(os.environ)
    if extra_env:
        env.update(extra_env)
    base_path = env.get("PATH", os.defpath)
    env["PATH"] = os.pathsep.join([str(p) for p in path_prefix] + [base_path])
    bash = shutil.which("bash", path=base_path) or "/bin/bash"
    args = [str(a) for a in args]

    direct = [str(script), *args]
    with_bash = [bash, str(script), *args]
    ran_with_bash = not os.access(script, os.X_OK)
    command = with_bash if ran_with_bash else direct

    started = time.monotonic()

    def spawn(cmd: list[str]) -> subprocess.Popen:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )

    def not_started(reason: str, exit_code: int | None) -> ScriptResult:
        return ScriptResult(
            command=command,
            exit_code=exit_code,
            stdout="",
            stderr=f"{script}: {reason}",
            timed_out=False,
            flooded=False,
            ran_with_bash=ran_with_bash,
            duration=time.monotonic() - started,
            timeout=timeout,
            kill_after_bytes=kill_after_bytes,
            start_error=reason,
        )

    try:
        proc = spawn(command)
    except (OSError, subprocess.SubprocessError) as exc:
        if ran_with_bash:
            return not_started(_start_reason(exc, script), None)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOEXEC, errno.EACCES):
            # No #! line (a shell would fall back to sh), or a noexec mount.
            ran_with_bash = True
            command = with_bash
            try:
                proc = spawn(command)
            except (OSError, subprocess.SubprocessError) as again:
                return not_started(_start_reason(again, script), None)
        else:
            interpreter = _shebang(script)
            if (
                isinstance(exc, OSError)
                and exc.errno == errno.ENOENT
                and interpreter is not None
                and str(exc.filename) != str(cwd)
            ):
                reason = f"its #! line names {interpreter!r}, which does not exist"
                if interpreter.endswith("\r"):
                    reason += " (the file has Windows CRLF line endings)"
            else:
                reason = _start_reason(exc, script)
            return not_started(reason, 126)

    stop = threading.Event()
    flood = threading.Event()
    budget = _Budget(kill_after_bytes, flood)
    out = _Stream(proc.stdout, output_limit, budget, stop)
    err = _Stream(proc.stderr, output_limit, budget, stop)

    timed_out = flooded = False
    deadline = started + timeout
    try:
        while not _exited(proc.pid):
            if flood.is_set():
                flooded = True
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            flood.wait(min(_POLL, remaining))
    finally:
        # Whatever happened, nothing of the script's process group outlives
        # the run (background jobs included); the leader is not reaped yet,
        # so its pid cannot have been reused.
        _killpg(proc.pid)
        try:
            returncode = proc.wait(timeout=_KILL_WAIT)
        except subprocess.TimeoutExpired:
            returncode = None
        drain_deadline = time.monotonic() + _DRAIN_WAIT
        for stream in (out, err):
            stream.thread.join(max(0.0, drain_deadline - time.monotonic()))
        # A child that escaped the group (setsid) may still hold the pipes:
        # stop reading rather than wait for it.
        stop.set()
        for stream in (out, err):
            stream.thread.join(1.0)
        for stream in (out, err):
            if not stream.thread.is_alive():
                stream.pipe.close()
    duration = time.monotonic() - started

    exit_code: int | None = None
    sig: int | None = None
    if not (timed_out or flooded) and returncode is not None:
        if returncode >= 0:
            exit_code = returncode
        else:
            sig = -returncode
    return ScriptResult(
        command=command,
        exit_code=exit_code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        flooded=flooded,
        ran_with_bash=ran_with_bash,
        duration=duration,
        timeout=timeout,
        kill_after_bytes=kill_after_bytes,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stdout_truncated=out.total > len(out.kept),
        stderr_truncated=err.total > len(err.kept),
        signal=sig,
    )
