"""What a learner script writes to the grader's disk, bounded.

The places a script may write are bwrap's blanks (``/tmp``, its scratch folder: tmpfs, each bounded in size and
gone with the run) and the folders the grader gives it writable: a state kept across two runs, a writable input's
folder. Those are folders of the grader's disk, which no mount bounds, so a script filling them (a file per
second at the file-size limit, forever) would fill the disk under every grading on the machine. A
:class:`DiskWatch` counts the bytes those folders hold, asked every quarter of a second by the run's supervision,
and the run is stopped at :data:`DISK_BYTES` (or at :data:`MOST_ENTRIES` files, which a count must not take too
long to walk). Usable without pytest.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

DISK_BYTES = 256 * 1024 * 1024  # all its writable folders together
MOST_ENTRIES = 20_000  # files and folders walked in one count; more is a script making files, not keeping state


class DiskWatch:
    """The bytes (allocated, as ``du`` counts them) in a run's writable folders, against a bound."""

    def __init__(self, folders: Iterable[Path], bound: int = DISK_BYTES) -> None:
        self.folders = [folder for folder in folders if folder.is_dir()]
        self.bound = bound
        self.hit = False

    def over(self) -> bool:
        """Whether the folders hold more than the bound (remembered once it is so)."""
        if not self.hit and self.folders:
            self.hit = _used(self.folders, self.bound) > self.bound
        return self.hit

    def describe(self) -> str:
        """What it did, in words that follow "was stopped: it"."""
        return f"wrote more than {self.bound // 2**20} MiB to the folders it may keep files in"


def _used(folders: list[Path], bound: int) -> int:
    """The bytes the folders hold, counted until past ``bound`` (or past :data:`MOST_ENTRIES` entries: over)."""
    total, seen, stack = 0, 0, [str(folder) for folder in folders]
    while stack and total <= bound:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:  # removed meanwhile, or not readable: nothing of it counted
            continue
        for entry in entries:
            seen += 1
            if seen > MOST_ENTRIES:
                return bound + 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return total
