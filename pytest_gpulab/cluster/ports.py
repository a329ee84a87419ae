"""Ports for lab clusters: a block of its own for every cluster this project starts, across processes.

kwokctl gives each component of a new cluster the first free port scanning down from
32767, the same scan in every kwokctl process. Two clusters created at once get the
same ports, and so does a cluster created while another is being restored (its
components are stopped a moment, their ports free): one cluster's API server then
reads the other's etcd, and a learner would be graded on another learner's cluster.
Every cluster (``KwokCluster.start``) therefore gets its six ports here: a block above
the kernel's ephemeral range (``ip_local_port_range``, where no outgoing connection
takes a port), chosen at random, each port checked free.

A block is reserved by its record, a file in the user's runtime directory
(:func:`runtime_dir`), read and written only under an flock of it. The process that
starts the cluster holds that lock until it stops the cluster (the kernel lets go of
it when the process ends, however it ends). The record names the cluster's directory,
so the reservation outlives that process (``gpulab up``): it holds while that directory
holds a cluster on the block (kwokctl's ``kwok.yaml`` with the block's etcd port), and
the block is taken back once the cluster is deleted. Records are emptied, never
deleted, so that two processes always lock the same file.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from .kwokctl import port_is_free

# kwokctl's options for the six ports of a binary-runtime cluster; a block's first port is etcd's.
PORT_OPTIONS = (
    "etcdPort", "etcdPeerPort", "kubeApiserverPort", "kwokControllerPort", "kubeControllerManagerPort",
    "kubeSchedulerPort",
)  # fmt: skip
RANGE_END = 65535
ETCD_PORT = re.compile(r"^\s*etcdPort:\s*(\d+)\s*$", re.MULTILINE)


def _ephemeral_end() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 60999


def block_starts() -> list[int]:
    """The first port of every block, in order."""
    size = len(PORT_OPTIONS)
    return list(range(_ephemeral_end() + 1, RANGE_END - size + 1, size))


def runtime_dir() -> Path:
    """``$GPULAB_RUNTIME_DIR``, else ``/tmp/gpulab-UID``: the same in every process of the user, whatever
    its HOME (pytester moves it), cache directory or TMPDIR; the user's only (mode 700)."""
    path = Path(os.environ.get("GPULAB_RUNTIME_DIR") or f"/tmp/gpulab-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = path.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise OSError(f"{path} is not a directory of this user's: remove it, or set GPULAB_RUNTIME_DIR to one")
    if found.st_mode & 0o077:
        path.chmod(0o700)
    return path


class Reservation:
    """A block held for one cluster: its kwokctl options, and the lock this process holds until :meth:`release`."""

    def __init__(self, start: int, fd: int, directory: Path) -> None:
        self.start = start
        self._fd = fd
        self._directory = directory

    def options(self) -> dict[str, object]:
        return {option: self.start + index for index, option in enumerate(PORT_OPTIONS)}

    @property
    def etcd_socket(self) -> Path:
        """A Unix socket path of the block's own for the cluster's etcd, where only this user can enter; short
        (a socket's path has at most 107 bytes, a cluster's directory may be deep). A killed etcd leaves the file:
        it goes when the reservation is released, else the next etcd on the block replaces it."""
        return self._directory / f"etcd-{self.start}.sock"

    def release(self) -> None:
        """Empty the record and let go of the lock: the cluster is gone, or never came."""
        if self._fd >= 0:
            self.etcd_socket.unlink(missing_ok=True)
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the file lets go of its flock
            self._fd = -1


def _holds(record: str, start: int) -> bool:
    """Whether the cluster directory the record names still holds a cluster on the block."""
    if not record:
        return False
    try:
        found = ETCD_PORT.search((Path(record) / "kwok.yaml").read_text(errors="replace"))
    except OSError:
        return False
    return found is not None and int(found.group(1)) == start


def _locked(path: Path) -> int | None:
    """The record opened and locked, or None while another process (or cluster of this one) holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _free(fd: int, start: int) -> bool:
    record = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    return not _holds(record, start) and all(port_is_free(port) for port in range(start, start + len(PORT_OPTIONS)))


def reserve(owner: Path, starts: Sequence[int] | None = None) -> Reservation:
    """A free block for the cluster whose directory is ``owner`` (kwokctl's ``WORKDIR/clusters/NAME``),
    from ``starts`` (default: every block, in random order)."""
    home = runtime_dir()
    directory = home / "port-blocks"
    directory.mkdir(mode=0o700, exist_ok=True)
    candidates = list(starts) if starts is not None else block_starts()
    if starts is None:
        random.shuffle(candidates)
    for start in candidates:
        fd = _locked(directory / str(start))
        if fd is None:
            continue
        if _free(fd, start):
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(owner.absolute()).encode(), 0)
            return Reservation(start, fd, home)
        os.close(fd)
    raise OSError("no block of free ports is left above the ephemeral range (see `ss -ltn`)")
