"""Linux's inotify through ctypes: the kernel says when a file changes, nothing is polled.

Only what the watch needs: watches added and removed, and the events read with a timeout, so a
reader's thread notices a stop within that timeout. Usable without pytest.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
from dataclasses import dataclass
from pathlib import Path

MODIFY, ATTRIB, CLOSE_WRITE = 0x2, 0x4, 0x8
MOVED_FROM, MOVED_TO, CREATE, DELETE = 0x40, 0x80, 0x100, 0x200
DELETE_SELF, MOVE_SELF, IGNORED, Q_OVERFLOW, ISDIR = 0x400, 0x800, 0x8000, 0x4000, 0x40000000
DONT_FOLLOW, ONLYDIR = 0x02000000, 0x01000000
CHANGES = MODIFY | ATTRIB | CLOSE_WRITE | MOVED_FROM | MOVED_TO | CREATE | DELETE | DELETE_SELF | MOVE_SELF
_NONBLOCK, _CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_HEADER = struct.Struct("iIII")


class InotifyError(OSError):
    pass


@dataclass(frozen=True)
class Event:
    wd: int
    mask: int
    name: str

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & ISDIR)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


class Inotify:
    """One inotify instance; close it (or use it as a context manager) to release its descriptor."""

    def __init__(self) -> None:
        self._libc = _libc()
        self.fd = int(self._libc.inotify_init1(_NONBLOCK | _CLOEXEC))
        if self.fd < 0:
            raise InotifyError(ctypes.get_errno(), f"inotify_init1: {os.strerror(ctypes.get_errno())}")

    def add(self, path: Path, mask: int = CHANGES) -> int:
        """The watch descriptor of ``path`` (a link is not followed); InotifyError if it cannot be watched."""
        wd = int(self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask | DONT_FOLLOW))
        if wd < 0:
            errno = ctypes.get_errno()
            raise InotifyError(errno, f"{path}: {os.strerror(errno)}")
        return wd

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # a watch the kernel already dropped: nothing to do

    def read(self, timeout: float, wake: int | None = None) -> list[Event]:
        """The events that came within ``timeout`` seconds (none: an empty list); a descriptor ``wake`` that
        becomes readable (a process's pidfd) ends the wait too."""
        ready, _, _ = select.select([self.fd, *([] if wake is None else [wake])], [], [], timeout)
        if self.fd not in ready:
            return []
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return []
        events, offset = [], 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
            events.append(Event(wd, mask, os.fsdecode(raw.rstrip(b"\0"))))
            offset += _HEADER.size + length
        return events

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
