"""What a learner script run is bounded by, and what became of it."""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

from .cgroups import CpuTime, starved


@dataclass(frozen=True)
class Limits:
    """Every bound on a run, defined here only; times are in seconds."""

    timeout: float = 20
    output_limit: int = 64 * 1024  # bytes kept per stream
    kill_after_bytes: int = 1024 * 1024  # both streams together
    poll: float = 0.02  # how often the supervisor looks at the process
    kill_wait: float = 5.0  # bounded wait for a SIGKILLed process to be reaped
    drain_wait: float = 1.5  # bounded wait for the pipes to reach EOF once the group is gone
    stop_wait: float = 1.0  # bounded wait for a reader told to stop
    read_poll: float = 0.1  # how often a reader looks at its stop flag


DEFAULT_LIMITS = Limits()


def human_bytes(n: int) -> str:
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
    timeout: float = DEFAULT_LIMITS.timeout
    kill_after_bytes: int = DEFAULT_LIMITS.kill_after_bytes
    stdout_bytes: int = 0  # bytes the script printed, kept or not
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    signal: int | None = None  # the signal that ended it, if it was not us
    start_error: str | None = None  # the script could not be started at all
    writes: tuple[tuple[str, str], ...] = ()  # the changes it asked of the cluster's view, all refused
    cpu: CpuTime | None = None  # what its processes had of the CPU, where the kernel kept it (cgroups.py)
    pid: int | None = None  # its first process's (a profiler finds the processes the run started by it)
    limit: str | None = None  # the bound that stopped it, as "was stopped: it ..." goes on: "used more than 2 GiB ..."
    repeated: bool = False  # not run: its script's first run that ended by force, given again (grading/scripts/runs.py)

    @property
    def starved(self) -> bool:
        """Whether it ran out of time while the machine kept it waiting for a CPU: not the script's doing."""
        return self.timed_out and starved(self.cpu, self.duration)

    def describe(self) -> str:
        """A short human summary: "exited 1", "was stopped after 20 s (timeout)"."""
        if self.start_error is not None:
            return f"could not be started: {self.start_error}"
        if self.timed_out:
            return f"was stopped after {self.timeout:g} s (timeout)"
        if self.flooded:
            return f"was stopped: it printed more than {human_bytes(self.kill_after_bytes)}"
        if self.limit is not None:
            return f"was stopped: it {self.limit}"
        if self.exit_code is not None:
            return f"exited {self.exit_code}"
        if self.signal is not None:
            return f"was killed by {self.signal_name}"
        return "was killed"

    @property
    def forced(self) -> bool:
        """Whether the run was ended by force, by its timeout or a limit (output, memory, processes)."""
        return self.timed_out or self.flooded or self.limit is not None

    @property
    def signal_name(self) -> str | None:
        """The signal that ended it, by name (``SIGSEGV``), or None."""
        if self.signal is None:
            return None
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"

    def stdout_lines(self) -> list[str]:
        return self.stdout.splitlines()


def _bash_ran_another_language(result: ScriptResult) -> str | None:
    """The #! interpreter bash ignored, when a script without the exec bit is not a shell script."""
    if not result.ran_with_bash or len(result.command) < 2:
        return None
    try:
        with open(result.command[1], "rb") as handle:
            first = handle.readline(256).decode("utf-8", "replace").strip()
    except OSError:
        return None
    shells = ("sh", "bash", "dash", "ksh", "zsh")
    interpreter = first[2:].split()[-1] if first.startswith("#!") and first[2:].split() else None
    return interpreter if interpreter and os.path.basename(interpreter) not in shells else None


LAB_PATH = re.compile(r"/\S*/((?:bin|out|etc|k8s|fixtures)/[^\s:'\"]+)")
GRADER_PATH = re.compile(r"/tmp/(?:pytest-of-|gpulab-|tmp)[^\s:'\"]*/([^/\s:'\"]+)")  # a file the grader made
KLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")


def said(result: ScriptResult) -> str:
    """What a script printed on stderr, for the learner: its first line, or a Python error's last line;
    and why, when bash ran a script of another language because it was not executable.

    Example:: f"{SCRIPT} {result.describe()}{said(result)}; it should exit 0."
    """
    if interpreter := _bash_ran_another_language(result):
        return f" (it is not executable, so the grader ran it with bash, not with {interpreter}: chmod +x it)"
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    lines = [line for line in lines if not KLOG_LINE.match(line)] or lines  # kubectl's log lines, then its error
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]
    line = LAB_PATH.sub(r"\1", line)  # the script's path as the lab names it, not the grader's copy of it
    line = GRADER_PATH.sub(r"\1", line)  # a file the grader gave it, by its own name
    return f" (it said: {line if len(line) <= 120 else line[:117] + '...'})"
