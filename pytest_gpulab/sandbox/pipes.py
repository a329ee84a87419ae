"""Draining a learner script's output pipes: keep the first bytes, count the rest, flag a flood."""

from __future__ import annotations

import os
import select
import threading
from typing import IO

_CHUNK = 64 * 1024


class Budget:
    """Total output of both streams; sets ``flood`` past the allowance."""

    def __init__(self, allowance: int, flood: threading.Event, wake_fd: int | None = None) -> None:
        self.allowance = allowance
        self.flood = flood
        self.wake_fd = wake_fd  # written once on a flood, for a supervisor that waits in poll()
        self.spent = 0
        self.lock = threading.Lock()

    def spend(self, n: int) -> None:
        with self.lock:
            self.spent += n
            if self.spent > self.allowance and not self.flood.is_set():
                self.flood.set()
                if self.wake_fd is not None:
                    os.write(self.wake_fd, b"!")

    def disarm(self) -> None:
        with self.lock:
            self.wake_fd = None


class PipeReader:
    """Drains one pipe: keeps the first ``limit`` bytes, counts the rest."""

    def __init__(self, pipe: IO[bytes], limit: int, poll: float, budget: Budget, stop: threading.Event) -> None:
        self.pipe = pipe
        self.limit = limit
        self.poll_ms = round(poll * 1000)
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
                if not poller.poll(self.poll_ms):
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
