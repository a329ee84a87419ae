"""Watching a learner script's process: has it ended, wait until it does, kill its group."""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import threading
import time
from collections.abc import Callable


def killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def exited(pid: int) -> bool:
    """Whether the process has ended, without reaping it (its pid, and so its
    process group id, stays reserved while it is a zombie)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class ExitWatch:
    """Waits until the process ends or the wake pipe is written, without polling (a pidfd)."""

    def __init__(self, pid: int, wake_fd: int) -> None:
        self.pidfd = os.pidfd_open(pid)
        self.poller = select.poll()
        for fd in (self.pidfd, wake_fd):
            self.poller.register(fd, select.POLLIN)

    def wait(self, seconds: float) -> None:
        self.poller.poll(max(1, math.ceil(seconds * 1000)))

    def close(self) -> None:
        os.close(self.pidfd)


def wait_for_end(
    pid: int,
    deadline: float,
    flood: threading.Event,
    wake_fd: int,
    poll: float,
    over_limit: Callable[[], bool] | None = None,
    every: float = 0.25,
) -> str:
    """ "exited", "flooded" (``flood`` was set, and ``wake_fd`` written), "limit" (``over_limit()``, asked every
    ``every`` seconds, said a bound was hit) or "timed out" at ``deadline``."""
    try:
        watch: ExitWatch | None = ExitWatch(pid, wake_fd)
    except OSError:  # no pidfd (an old kernel): look every ``poll`` seconds instead
        watch = None
    try:
        while not exited(pid):
            if flood.is_set():
                return "flooded"
            if over_limit is not None and over_limit():
                return "limit"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timed out"
            if watch:
                watch.wait(min(remaining, every) if over_limit is not None else remaining)
            else:
                flood.wait(min(poll, remaining))
        return "exited"
    finally:
        if watch:
            watch.close()
