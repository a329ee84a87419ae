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
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..cluster.environ import environ_now
from .bwrap import BLANK_BYTES
from .cgroups import CpuTime, RunGroup
from .confine import Layout, Sandbox, seccomp_fd
from .disk import DiskWatch
from .pipes import Budget, PipeReader
from .script_result import DEFAULT_LIMITS, Limits, ScriptResult, human_bytes
from .start_errors import exec_failure, shebang, start_reason
from .supervision import killpg, wait_for_end
from .watches import BlankWatch, IdleWatch

__all__ = ["DEFAULT_LIMITS", "Limits", "SandboxPlan", "ScriptResult", "ScriptRun", "run_script"]

_START_ERRORS = (OSError, subprocess.SubprocessError)


@dataclass(frozen=True)
class SandboxPlan:
    """A sandbox and what a run in it sees (see :mod:`pytest_gpulab.sandbox.confine`)."""

    sandbox: Sandbox
    layout: Layout

    def wrap(self, command: Sequence[str], env: Mapping[str, str], filter_fd: int | None) -> list[str]:
        return self.sandbox.wrap(command, self.layout, env, filter_fd)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        return self.sandbox.environment(self.layout, env)


def _checked_paths(script: Path, cwd: Path) -> tuple[Path, Path]:
    script = Path(os.path.abspath(script))
    if not script.exists():
        raise FileNotFoundError(errno.ENOENT, "no such script", str(script))
    if not script.is_file():
        raise FileNotFoundError(errno.ENOENT, "not a regular file", str(script))
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "scratch directory missing", str(cwd))
    return script, cwd


class ScriptRun:
    """One run of a script: ``start()``; then ``supervise()``, always followed by ``reap()``; then ``result()``."""

    started: float  # set by start()
    proc: subprocess.Popen[bytes]  # this and the streams are set by a successful start()
    out: PipeReader
    err: PipeReader

    def __init__(
        self,
        script: Path,
        args: Sequence[str] = (),
        *,
        cwd: Path,
        path_prefix: Sequence[Path] = (),
        extra_env: Mapping[str, str] | None = None,
        limits: Limits = DEFAULT_LIMITS,
        sandbox: SandboxPlan | None = None,
        on_idle: Callable[[float], None] | None = None,
    ) -> None:
        self.script, self.cwd = _checked_paths(script, cwd)
        self.on_idle = on_idle  # called while the run is seen only waiting (watches.py)
        self.limits = limits
        self.sandbox = sandbox
        self.env = environ_now()
        if extra_env:
            self.env.update(extra_env)
        base_path = self.env.get("PATH", os.defpath)
        self.env["PATH"] = os.pathsep.join([str(p) for p in path_prefix] + [base_path])
        bash = shutil.which("bash", path=base_path) or "/bin/bash"
        argv = [str(a) for a in args]
        self.with_bash = [bash, str(self.script), *argv]
        self.ran_with_bash = not os.access(self.script, os.X_OK)
        self.command = self.with_bash if self.ran_with_bash else [str(self.script), *argv]
        self.stop = threading.Event()
        self.flood = threading.Event()
        self.timed_out = self.flooded = False
        self.limit: str | None = None  # the bound that stopped it (a memory or process limit), in words
        self.returncode: int | None = None
        self.group: RunGroup | None = None  # a sandboxed run's control groups (cgroups.py)
        writable = [seen.source for seen in sandbox.layout.exposures if not seen.read_only] if sandbox else []
        self.disk = DiskWatch(writable)  # the grader's own folders it may write: bounded by a count, not a mount
        self.blanks = BlankWatch(None, (), BLANK_BYTES)  # its tmpfs blanks, watched once it runs
        self.cpu: CpuTime | None = None

    def _sandboxed_start_error(self) -> ScriptResult | None:
        """In the sandbox the exec happens out of sight: decide bash, or a missing #! interpreter, here."""
        interpreter = shebang(self.script)
        if interpreter is None:
            self.ran_with_bash, self.command = True, self.with_bash
            return None
        program = interpreter.split()[0] if interpreter.split() else interpreter
        if (program.startswith("/") and not os.path.exists(program)) or interpreter.endswith("\r"):
            self.ran_with_bash = False
            return self._not_started(FileNotFoundError(errno.ENOENT, "No such file or directory", program))
        return None

    def start(self) -> ScriptResult | None:
        """Start the script, falling back to bash; when it cannot start, the result saying why."""
        self.started = time.monotonic()
        if self.sandbox is not None and not self.ran_with_bash and (failure := self._sandboxed_start_error()):
            return failure
        try:
            self.proc = self._spawn()
        except _START_ERRORS as exc:
            # ENOEXEC: no #! line (a shell would fall back to sh); EACCES: a noexec mount. Bash may still run it.
            if self.ran_with_bash or not (isinstance(exc, OSError) and exc.errno in (errno.ENOEXEC, errno.EACCES)):
                return self._not_started(exc)
            self.ran_with_bash, self.command = True, self.with_bash
            try:
                self.proc = self._spawn()
            except _START_ERRORS as again:
                return self._not_started(again)
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.wake_r, self.wake_w = os.pipe()
        budget = Budget(self.limits.kill_after_bytes, self.flood, self.wake_w)
        self.out, self.err = (
            PipeReader(pipe, self.limits.output_limit, self.limits.read_poll, budget, self.stop)
            for pipe in (self.proc.stdout, self.proc.stderr)
        )
        return None

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self.sandbox is None:
            return self._popen(self.command, self.env, ())
        if self.group is None:
            bounds = self.sandbox.sandbox.limits
            self.group = RunGroup.make(bounds.processes, memory=bounds.memory_bytes)
        with seccomp_fd(self.sandbox.sandbox.filter) as fd:
            command = self.group.command(self.sandbox.wrap(self.command, self.env, fd))
            return self._popen(command, self.sandbox.environment(self.env), () if fd is None else (fd,))

    def _popen(self, command: list[str], env: Mapping[str, str], fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            pass_fds=fds,
        )

    def _not_started(self, exc: BaseException) -> ScriptResult:
        if self.group is not None:
            self.group.close()
        if self.ran_with_bash:
            reason, exit_code = start_reason(exc, self.script), None
        else:
            reason, exit_code = exec_failure(exc, self.script, self.cwd), 126
        return ScriptResult(
            command=self.command,
            exit_code=exit_code,
            stdout="",
            stderr=f"{self.script}: {reason}",
            timed_out=False,
            flooded=False,
            ran_with_bash=self.ran_with_bash,
            duration=time.monotonic() - self.started,
            timeout=self.limits.timeout,
            kill_after_bytes=self.limits.kill_after_bytes,
            start_error=reason,
        )

    def supervise(self) -> None:
        """Wait until the script ends, runs out of time, prints too much or reaches a bound."""
        group = self.group if self.group is not None and self.group.events else None
        self.blanks = BlankWatch(self.group, self.sandbox.layout.blanks if self.sandbox else (), BLANK_BYTES)
        idle = IdleWatch(self.group, self.on_idle)

        def over() -> bool:
            idle.look()
            return self.disk.over() or self.blanks.over() or (group is not None and bool(group.limits_hit()))

        ending = wait_for_end(
            self.proc.pid, self.started + self.limits.timeout, self.flood, self.wake_r, self.limits.poll, over
        )  # fmt: skip
        self.flooded, self.timed_out = ending == "flooded", ending == "timed out"
        self.limit = self._limit_hit() if ending in ("limit", "exited") else None  # hit in its last moments too

    def _limit_hit(self) -> str | None:
        """The bound its processes ran into, in words that follow "was stopped: it"."""
        if self.disk.hit:
            return self.disk.describe()
        if self.blanks.full is not None:
            return self.blanks.describe()
        hit = self.group.limits_hit() if self.group is not None and self.sandbox is not None else []
        if not hit or self.sandbox is None:
            return None
        bounds = self.sandbox.sandbox.limits
        if "memory" in hit:
            return f"used more than {human_bytes(bounds.memory_bytes)} of memory at once"
        return f"started more than {bounds.processes} processes at once"

    def reap(self) -> None:
        """Kill the process group, reap the script and stop the readers, every wait bounded."""
        # Whatever happened, nothing of the script's process group outlives
        # the run (background jobs included); the leader is not reaped yet,
        # so its pid cannot have been reused.
        if self.group is not None:
            self.cpu = self.group.cpu_time(self.proc.pid)  # the leader not reaped yet: its own wait is there
        killpg(self.proc.pid)
        try:
            self.returncode = self.proc.wait(timeout=self.limits.kill_wait)
        except subprocess.TimeoutExpired:
            self.returncode = None
        if self.group is not None:
            self.group.close()
        streams = (self.out, self.err)
        drain_deadline = time.monotonic() + self.limits.drain_wait
        for stream in streams:
            stream.thread.join(max(0.0, drain_deadline - time.monotonic()))
        # A child that escaped the group (setsid) may still hold the pipes:
        # stop reading rather than wait for it.
        self.stop.set()
        for stream in streams:
            stream.thread.join(self.limits.stop_wait)
        for stream in streams:
            if not stream.thread.is_alive():
                stream.pipe.close()
        self.out.budget.disarm()  # a reader still alive must not write to a closed (reused) descriptor
        for fd in (self.wake_r, self.wake_w):
            os.close(fd)

    def result(self) -> ScriptResult:
        duration = time.monotonic() - self.started
        exit_code = sig = None
        if not (self.timed_out or self.flooded or self.limit) and self.returncode is not None:
            if self.returncode >= 0:
                exit_code = self.returncode
            else:
                sig = -self.returncode
        out, err = self.out, self.err
        return ScriptResult(
            command=self.command,
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=self.timed_out,
            flooded=self.flooded,
            ran_with_bash=self.ran_with_bash,
            duration=duration,
            timeout=self.limits.timeout,
            kill_after_bytes=self.limits.kill_after_bytes,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            stdout_truncated=out.total > len(out.kept),
            stderr_truncated=err.total > len(err.kept),
            signal=sig,
            cpu=self.cpu,
            pid=self.proc.pid,
            limit=self.limit,
        )


def run_script(
    script: Path,
    args: Sequence[str] = (),
    *,
    cwd: Path,
    path_prefix: Sequence[Path] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_LIMITS.timeout,
    output_limit: int = DEFAULT_LIMITS.output_limit,
    kill_after_bytes: int = DEFAULT_LIMITS.kill_after_bytes,
    sandbox: SandboxPlan | None = None,
    on_idle: Callable[[float], None] | None = None,
) -> ScriptResult:
    """Run ``script`` with ``args`` and return what happened; ``on_idle(seconds)`` is called whenever it is seen
    only waiting (:class:`~.watches.IdleWatch`).

    A script without the exec bit is run as ``bash script args...``
    (``ran_with_bash``), as is an executable one without a ``#!`` line.
    A script that cannot be started (no permission, a missing ``#!``
    interpreter, no bash...) does not raise: the result has ``start_error``
    set and ``describe()`` says "could not be started: ...".
    Raises FileNotFoundError when the script does not exist (or is not a
    file) and NotADirectoryError when ``cwd`` is not a directory.
    """
    limits = replace(DEFAULT_LIMITS, timeout=timeout, output_limit=output_limit, kill_after_bytes=kill_after_bytes)
    run = ScriptRun(
        script, args, cwd=cwd, path_prefix=path_prefix, extra_env=extra_env, limits=limits, sandbox=sandbox,
        on_idle=on_idle,
    )  # fmt: skip
    failure = run.start()
    if failure is not None:
        return failure
    try:
        run.supervise()
    finally:
        run.reap()
    return run.result()
