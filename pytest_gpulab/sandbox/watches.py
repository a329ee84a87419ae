"""What a run's supervision looks at every quarter of a second, besides its time and its output, through the run's
control groups (``cgroups.py``): whether it filled one of its blanks, and whether it only waits.

- **A full blank.** Each blank (``/tmp``, its scratch folder...) is a tmpfs of ``BLANK_BYTES``
  (``bwrap.py``). A script that fills one has written what no checker writes, and a loop that goes on writing
  to it (each write refused) would spin until its timeout: :class:`BlankWatch` sees the blank full from outside,
  through ``/proc/PID/root`` of one of the run's processes, and the run is stopped, as at its memory bound.
- **A run that only waits** (a ``sleep``, a kubectl between its retries on an API server that fails) needs no
  core: :class:`IdleWatch` says so at each look that finds it so, with how long it has been going, so that its
  grading may start another run beside it (``grading/scripts/cores.py``). It only waits when over the last
  ``IDLE_AFTER`` seconds it ran, or waited for a CPU, under ``IDLE_SHARE`` of the time (a run starved by a busy
  machine is working), and holds under ``IDLE_MEMORY``.

Where the groups keep no accounts (no cgroup v2 of the grader's), neither ever speaks. Usable without pytest.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .cgroups import RunGroup

IDLE_AFTER = 0.5  # seconds
IDLE_SHARE = 0.1  # of one CPU
IDLE_MEMORY = 256 * 1024 * 1024  # bytes: a run holding more keeps its core, so that idle runs never add up
FULL_BELOW = 64 * 1024  # bytes free in a blank: a tmpfs this near its size is full


class IdleWatch:
    """Calls ``on_idle(seconds)`` at each look that finds the run only waiting, with how long it has been going."""

    def __init__(self, group: RunGroup | None, on_idle: Callable[[float], None] | None) -> None:
        self.group, self.on_idle = group, on_idle
        self.started = time.monotonic()
        self.samples: list[tuple[float, float]] = []  # (when, seconds it ran or waited for a CPU by then)
        self.blind = on_idle is None or group is None or group.accounts is None

    def look(self) -> None:
        if self.blind:
            return
        assert self.group is not None and self.on_idle is not None
        now, used = time.monotonic(), self.group.cpu_wanted()
        if used is None:
            self.blind = True
            return
        self.samples.append((now, used))
        then = [sample for sample in self.samples if now - sample[0] >= IDLE_AFTER]
        if not then:
            return
        since, used_then = then[-1]
        self.samples = [sample for sample in self.samples if sample[0] >= since]
        held = self.group.memory_used()
        if (used - used_then) / (now - since) < IDLE_SHARE and held is not None and held < IDLE_MEMORY:
            self.on_idle(now - self.started)


class BlankWatch:
    """Whether one of the run's blanks is full, seen from one of its processes inside its mounts."""

    def __init__(self, group: RunGroup | None, blanks: Sequence[Path], size: int) -> None:
        self.group, self.blanks, self.size = group, list(blanks), size
        self.full: Path | None = None
        self._own_mounts = _mount_namespace("self")

    def over(self) -> bool:
        if self.full is None and self.group is not None and self.blanks and self._own_mounts is not None:
            inside = next(
                (pid for pid in self.group.pids() if _mount_namespace(str(pid)) not in (None, self._own_mounts)), None
            )
            if inside is not None:
                self.full = next((blank for blank in self.blanks if _free(inside, blank) < FULL_BELOW), None)
        return self.full is not None

    def describe(self) -> str:
        """What it did, in words that follow "was stopped: it"."""
        return (
            f"filled a folder it may write in (/tmp, its working folder or its home: {self.size // 2**20} MiB each), "
            "where a checker writes a few small files at most"
        )


def _mount_namespace(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _free(pid: int, blank: Path) -> int:
    """Bytes free in the blank as the run's process ``pid`` sees it; unknown counts as room."""
    with contextlib.suppress(OSError):
        seen = os.statvfs(f"/proc/{pid}/root{blank}")
        return seen.f_bavail * seen.f_frsize
    return FULL_BELOW
