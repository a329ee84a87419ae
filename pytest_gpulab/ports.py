"""Ports for lab clusters that run side by side, and are restored while others start.

kwokctl gives each component of a new cluster the first free port scanning down from
32767, the same scan in every kwokctl process. Two clusters created at once get the
same ports, and so does a cluster created while another is being restored (its
components are stopped a moment, their ports free): one cluster's API server then
reads the other's etcd, and a learner would be graded on another learner's cluster.
Grading clusters therefore get their ports from here: blocks above the kernel's
ephemeral range (``ip_local_port_range``) and below kwokctl's scan, never two alike in
one process, each checked free, chosen at random so that two processes seldom meet.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .kwokctl import port_is_free

# kwokctl's options for the six ports of a binary-runtime cluster.
PORT_OPTIONS = (
    "etcdPort", "etcdPeerPort", "kubeApiserverPort", "kwokControllerPort", "kubeControllerManagerPort",
    "kubeSchedulerPort",
)  # fmt: skip
RANGE_END = 65535


def _ephemeral_end() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 60999


class PortBlocks:
    """Blocks of ``len(PORT_OPTIONS)`` ports, handed out and given back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: set[int] = set()

    def _free_block(self) -> int:
        size = len(PORT_OPTIONS)
        starts = list(range(_ephemeral_end() + 1, RANGE_END - size + 1, size))
        random.shuffle(starts)
        for start in starts:
            if start not in self._taken and all(port_is_free(port) for port in range(start, start + size)):
                return start
        raise OSError("no block of free ports is left above the ephemeral range")

    @contextmanager
    def block(self) -> Iterator[dict[str, object]]:
        """kwokctl options naming a block of free ports, kept from this process's other clusters until the end."""
        with self._lock:
            start = self._free_block()
            self._taken.add(start)
        try:
            yield {option: start + index for index, option in enumerate(PORT_OPTIONS)}
        finally:
            with self._lock:
                self._taken.discard(start)


PORTS = PortBlocks()
