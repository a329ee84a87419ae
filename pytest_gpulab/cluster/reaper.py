"""No lab cluster outlives the process that started it: a watchdog for each cluster, and a sweep at each start.

kwokctl's binary runtime starts etcd, the API server, the controller manager, the scheduler and kwok detached
(a session of their own), and records their pids in ``WORKDIR/clusters/NAME/pids/``. A grader killed by SIGKILL
or SIGTERM runs no ``finally``, so its cluster would run on, its folder kept. So a started cluster (unless it is
meant to outlive its caller, as ``gpulab up``'s is) gets a watchdog: this file run by itself,
``python -I -S reaper.py WORKDIR/gpulab-grader.json`` (the standard library only), in a session of its own so
that a signal to the grader's process group spares it. It takes the record's lock, waits for the grader to end
on a pidfd (the process, whatever thread started the cluster: ``PR_SET_PDEATHSIG`` follows the creating thread)
and then reaps: every process of the user whose command line names the work directory (kwokctl still creating
the cluster, the components, their tools; so those kwokctl has not recorded yet too) is found by ``/proc``, held
by a pidfd and checked again (a reused pid is never signalled), sent SIGTERM, waited for (bounded) and sent
SIGKILL; then the cluster's folder goes. A grader that stops its cluster removes the record and ends the
watchdog; a watchdog whose record is gone ends by itself.

A leftover whose watchdog died too (SIGKILL to every process of the user, the OOM killer) is found at the
next start by :func:`sweep`: a ``gpulab-kwok-*`` folder in the temporary directory whose record no watchdog
holds and whose grader is gone gets a watchdog of its own, which reaps at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RECORD = "gpulab-grader.json"  # in the cluster's work directory: who started it, and what to remove
WORKDIR_PREFIX = "gpulab-kwok-"  # KwokCluster's own work directories, in the temporary directory
SCRIPT = str(Path(__file__).resolve())
WAKE_MS = 2000  # how often a watchdog looks whether its cluster was stopped (its grader's end wakes it at once)
TERM_SECONDS = 3.0  # SIGTERM, then SIGKILL after this
ROUNDS = 5  # a component started while a round ran is found by the next
SWEEP_LIMIT = 8  # leftovers given a watchdog at one start
_sweepers: list[subprocess.Popen[bytes]] = []


def _read(path: str) -> str:
    try:
        with open(path, "rb") as file:
            return file.read().decode(errors="replace")
    except OSError:
        return ""


def start_time(pid: int) -> str:
    """When the process started, in clock ticks since boot (``/proc/PID/stat`` field 22): with its pid, one process."""
    fields = _read(f"/proc/{pid}/stat").rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def identity() -> dict[str, Any]:
    """This process, as a record names it: pid, start time, boot and pid namespace."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    boot = _read("/proc/sys/kernel/random/boot_id").strip()
    return {"pid": os.getpid(), "start": start_time(os.getpid()), "boot": boot, "pidns": namespace}


def _gone(owner: dict[str, Any]) -> bool:
    return owner.get("boot") != identity()["boot"] or start_time(int(owner["pid"])) != owner.get("start")


# -- the grader's side ---------------------------------------------------------------


def _spawn(record: Path) -> subprocess.Popen[bytes]:
    """A watchdog for the record: no stdio of the grader's (a pipe someone reads would stay open), cwd /."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", SCRIPT, str(record)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, cwd="/", start_new_session=True,
    )  # fmt: skip


class Watchdog:
    """The watchdog of the cluster in ``workdir``, started by the process that starts the cluster."""

    def __init__(self, workdir: Path, cluster_dir: Path, remove_workdir: bool) -> None:
        self.record = workdir / RECORD
        owner = {**identity(), "cluster_dir": str(cluster_dir), "remove_workdir": remove_workdir}
        self.record.write_text(json.dumps(owner))
        self.process = _spawn(self.record)

    def end(self) -> None:
        """The cluster is stopped: the watchdog has nothing left to do."""
        self.record.unlink(missing_ok=True)
        self.process.terminate()  # its default action: nothing of the cluster is left to clean
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _abandoned(record: Path) -> bool:
    """Whether no watchdog holds the record (a shared lock is free) and its grader, of this pid namespace, is gone."""
    try:
        fd = os.open(record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        owner = json.loads(os.read(fd, 65536))
        return bool(owner.get("pidns") == identity()["pidns"] and _gone(owner))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # BlockingIOError: a watchdog holds it
        return False
    finally:
        os.close(fd)


def sweep(parent: Path | None = None, limit: int = SWEEP_LIMIT) -> list[Path]:
    """Give a watchdog to each abandoned cluster folder under ``parent`` (the temporary directory), ``limit`` at
    most; it finds the grader gone and reaps at once. The folders it took, for the caller to say."""
    _sweepers[:] = [process for process in _sweepers if process.poll() is None]
    taken: list[Path] = []
    try:
        entries = os.scandir(parent or tempfile.gettempdir())
    except OSError:
        return taken
    with entries:
        for entry in entries:
            if len(taken) < limit and entry.name.startswith(WORKDIR_PREFIX) and _abandoned(Path(entry.path) / RECORD):
                taken.append(Path(entry.path))
    _sweepers.extend(_spawn(folder / RECORD) for folder in taken)
    return taken


# -- the watchdog's side ---------------------------------------------------------------


def _naming(needle: str) -> list[int]:
    """A pidfd for each process whose command line names ``needle``, read again once it is held (no reused pid);
    no watchdog among them."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid() or not _names(name, needle):
            continue
        try:
            fd = os.pidfd_open(int(name))
        except OSError:
            continue
        if _names(name, needle):
            found.append(fd)
        else:
            os.close(fd)
    return found


def _names(pid: str, needle: str) -> bool:
    command = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
    return needle in command and SCRIPT not in command


def _signal(pidfds: list[int], signum: int) -> None:
    for fd in pidfds:
        try:
            signal.pidfd_send_signal(fd, signum)
        except OSError:  # it ended (ESRCH), or it is not ours
            continue


def _wait_all(pidfds: list[int], seconds: float) -> list[int]:
    """Wait until each process ended, ``seconds`` at most; the pidfds of those still running."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    running, deadline = set(pidfds), time.monotonic() + seconds
    while running and (left := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(int(left * 1000) + 1):
            poller.unregister(fd)
            running.discard(fd)
    return [fd for fd in pidfds if fd in running]


def reap(workdir: Path, owner: dict[str, Any]) -> None:
    """Stop every process naming the work directory (SIGTERM, a bounded wait, SIGKILL), then remove the
    cluster's folder (and the work directory if the cluster made it)."""
    for _ in range(ROUNDS):
        pidfds = _naming(f"{workdir}/")
        if not pidfds:
            break
        _signal(pidfds, signal.SIGTERM)
        _signal(_wait_all(pidfds, TERM_SECONDS), signal.SIGKILL)
        _wait_all(pidfds, TERM_SECONDS)
        for fd in pidfds:
            os.close(fd)
    shutil.rmtree(owner["cluster_dir"], ignore_errors=True)
    if owner.get("remove_workdir"):
        shutil.rmtree(workdir, ignore_errors=True)
    (workdir / RECORD).unlink(missing_ok=True)


def _grader_ended(owner: dict[str, Any], record: Path) -> bool:
    """Wait until the grader ends (True) or its cluster is stopped, the record removed (False)."""
    poller = select.poll()
    with contextlib.suppress(OSError):  # ESRCH: it ended already; ENOSYS (Linux < 5.3): _gone at each wake
        poller.register(os.pidfd_open(int(owner["pid"])), select.POLLIN)
    while record.exists():
        if _gone(owner) or poller.poll(WAKE_MS):  # _gone also tells a pid reused before the pidfd was opened
            return record.exists()
    return False


def main(argv: list[str]) -> int:
    record = Path(argv[1])
    try:
        fd = os.open(record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until this watchdog ends; another one for the record waits here
        owner = json.loads(os.read(fd, 65536))
    except (OSError, ValueError):
        return 0  # the cluster was stopped already
    if _grader_ended(owner, record):
        reap(record.parent, owner)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
