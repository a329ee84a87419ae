"""A fair share of the CPU for each learner script, and a measure of whether the machine starved it.

Every script run on the machine goes into control groups of its own, below one group per grading. In CPU a
grading's scripts together weigh as one process of the machine (``cpu.shares`` in cgroup v1, ``cpu.weight`` in
v2), however many processes they start, and each run has one CPU at most (a CFS quota): a grading whose scripts
start 120 busy loops weighs what an honest grading's one script does, and every grading's API server and
pytest keep their share. The processes of every script on the machine are bounded at once by one parent group,
``gpulab-scripts`` (``pids.max``), and each run's by its own.

A run's group also says how long its processes were ready to run and all waited for a CPU (the kernel's
pressure stall information, ``cpu.pressure``, its "full" line) and how much CPU they had (``cpu.stat``), both
kept by every cgroup v2 group. A run that ran out of time having waited for a CPU a quarter of it or more, and
had less than half a CPU, was starved: by the machine, or by the grading's other runs beside it (the grader
runs it again alone to tell which), never by its own processes. A script whose own processes crowd each other
has its CPU, so its timeout stays its own. Where no group can be made (no cgroup file system, not root, a
read-only mount) scripts run niced, and a timeout is the script's. Groups left by a grader that was killed are
removed by the next run's.
Usable without pytest.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .group_sweep import PARENT, owner, sweep
from .group_sweep import STALE_AFTER as STALE_AFTER  # its first home, where tests read it

SCRIPTS_PROCESSES = 4096  # the processes of every script on the machine at once
CPU_PERIOD_US = 100_000  # the quota's period; a run gets one CPU of it
STARVED_SHARE = 0.25  # a run that waited for a CPU this share of its time, or more,
FED_SHARE = 0.5  # and had less CPU than this share of one, was starved
NICENESS = 10  # every script's, below the graders' own
PIDS_READ = 64  # a run's processes read at most, to look into its mounts
EMPTY_WAIT = 10.0  # seconds for a killed run's processes to leave its groups, on a crowded machine

# Joins the groups whose cgroup.procs files are given (writing 0 moves the writer), then runs the command niced
# by the program $0 names (nice).
ENTER = f'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$0" -n {NICENESS} "$@"'


def _mounts(mountinfo: str) -> dict[str, Path]:
    """Where the hierarchies are: "cpu", "pids" and "memory" (cgroup v1 controllers) and "unified" (cgroup v2)."""
    found: dict[str, Path] = {}
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        kind, *rest = tail.split() or [""]
        where = Path(fields.split()[4].replace("\\040", " ")) if len(fields.split()) > 4 else None
        if where is None:
            continue
        if kind == "cgroup2":
            found.setdefault("unified", where)
        elif kind == "cgroup" and len(rest) > 1:
            for controller in set(rest[1].split(",")) & {"cpu", "pids", "memory"}:
                found.setdefault(controller, where)
    return found


@dataclass(frozen=True)
class Hierarchies:
    """The cgroup file systems a run's groups are made in: v1 ``cpu`` and ``pids`` where the controllers are
    mounted alone, and the v2 tree, which keeps pressure for every group and may hold the controllers too."""

    cpu: Path | None = None
    pids: Path | None = None
    unified: Path | None = None
    unified_controls: frozenset[str] = frozenset()  # controllers a v2 group gets ("cpu", "pids", "memory")
    memory: Path | None = None

    @property
    def any(self) -> bool:
        return bool(self.cpu or self.pids or self.unified or self.memory)


@cache
def hierarchies() -> Hierarchies:
    """This machine's, as the grader may use them: none unless it is root and the mounts are writable."""
    if os.geteuid() != 0:
        return Hierarchies()
    try:
        mounts = _mounts(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return Hierarchies()
    usable = {name: path for name, path in mounts.items() if os.access(path, os.W_OK)}
    unified, controls = usable.get("unified"), frozenset[str]()
    if unified is not None:
        offered = _read(unified / "cgroup.controllers").split()
        controls = frozenset(c for c in ("cpu", "pids", "memory") if c in offered and c not in usable)
    return Hierarchies(usable.get("cpu"), usable.get("pids"), unified, controls, usable.get("memory"))


@cache
def _tool(name: str) -> str:
    """The grader's own ``name`` (never one a script's PATH would find)."""
    return shutil.which(name) or f"/usr/bin/{name}"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _stalled_us(pressure: str) -> int | None:
    """The "full total" of a cpu.pressure text: microseconds in which every task of the group that had work
    waited for a CPU (none ran); a run's own processes crowding each other are not counted."""
    for line in pressure.splitlines():
        if line.startswith("full "):
            for item in line.split():
                if item.startswith("total="):
                    return int(item[len("total=") :])
    return None


def _counted(events: str, name: str) -> bool:
    """Whether the counter ``name`` of an events file (pids.events, memory.events, memory.oom_control) is past 0."""
    return any(line.split()[1:2] not in ([], ["0"]) for line in events.splitlines() if line.split()[:1] == [name])


def _usage_us(stat: str) -> int | None:
    """The usage_usec of a cpu.stat text: microseconds of CPU the group's processes had."""
    for line in stat.splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1])
    return None


def _run_delay(pid: int) -> float:
    """Seconds the process waited on a run queue (``/proc/PID/schedstat``): all of it before it joined a group."""
    fields = _read(Path(f"/proc/{pid}/schedstat")).split()
    return int(fields[1]) / 1e9 if len(fields) > 1 and fields[1].isdigit() else 0.0


@dataclass(frozen=True)
class CpuTime:
    """What a run's processes had of the CPU: seconds they waited for one, and seconds they ran."""

    waited: float
    used: float


@dataclass
class RunGroup:
    """The groups of one run, made before it starts; :meth:`close` kills what is left in them and removes them."""

    folders: list[Path] = field(default_factory=list)
    accounts: Path | None = None  # the run's own v2 group, which keeps cpu.pressure and cpu.stat
    events: dict[str, Path] = field(default_factory=dict)  # by limit ("processes", "memory"), where it counts hits

    @classmethod
    def make(cls, processes: int, where: Hierarchies | None = None, memory: int | None = None) -> RunGroup:
        """A run's groups in every hierarchy there is (none where the grader may make none), of at most
        ``processes`` processes and ``memory`` bytes together."""
        where = hierarchies() if where is None else where
        sweep(roots(where))
        group, name = cls(), f"run-{os.getpid()}-{secrets.token_hex(6)}"  # the grader's pid: whose it is
        try:
            if where.unified is not None:  # joined first: the wait to join the others is the run's too
                group._unified(where, name, processes, memory)
            if where.cpu is not None:  # below its grading's group, beside the machine's processes
                group._cpu_v1(group._made(where.cpu, name, below=grading()))
            if where.pids is not None:
                group._pids(group._made(where.pids, name, parent_max=SCRIPTS_PROCESSES), processes)
            if where.memory is not None and memory is not None:
                group._memory_v1(group._made(where.memory, name), memory)
        except OSError:
            group.close()  # half a set of groups is none: the run is niced only
            group = cls()
        return group

    def _made(
        self, root: Path, name: str, parent_max: int | None = None, controls: str = "", below: str = PARENT
    ) -> Path:
        parent = root / below
        for _ in range(3):  # another grader may remove an empty parent between our two mkdirs
            parent.mkdir(exist_ok=True)
            if controls:
                _write(parent / "cgroup.subtree_control", controls)
            if parent_max is not None:
                _write(parent / "pids.max", str(parent_max))
            try:
                (parent / name).mkdir()
            except FileNotFoundError:
                continue
            self.folders.append(parent / name)
            return parent / name
        raise OSError(errno.ENOENT, "the parent group kept vanishing", str(parent))

    def _cpu_v1(self, folder: Path) -> None:
        _write(folder / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        _write(folder / "cpu.cfs_quota_us", str(CPU_PERIOD_US))

    def _pids(self, folder: Path, processes: int) -> None:
        _write(folder / "pids.max", str(processes))
        self.events["processes"] = folder / "pids.events"

    def _memory_v1(self, folder: Path, memory: int) -> None:
        _write(folder / "memory.limit_in_bytes", str(memory))
        self.events["memory"] = folder / "memory.oom_control"

    def _unified(self, where: Hierarchies, name: str, processes: int, memory: int | None) -> None:
        assert where.unified is not None
        controls = " ".join(f"+{c}" for c in sorted(where.unified_controls))
        if controls:
            _write(where.unified / "cgroup.subtree_control", controls)
        bound = SCRIPTS_PROCESSES if "pids" in where.unified_controls else None
        if "cpu" in where.unified_controls:  # one parent for every grading would weigh all their scripts as one
            folder = self._made(where.unified, name, bound, below=grading())
        else:
            folder = self._made(where.unified, name, bound)
        if "cpu" in where.unified_controls:
            _write(folder / "cpu.max", f"{CPU_PERIOD_US} {CPU_PERIOD_US}")
        if "pids" in where.unified_controls:
            self._pids(folder, processes)
        if "memory" in where.unified_controls and memory is not None:
            _write(folder / "memory.max", str(memory))
            self.events["memory"] = folder / "memory.events"
        if (folder / "cpu.pressure").exists() and (folder / "cpu.stat").exists():
            self.accounts = folder

    def command(self, command: list[str]) -> list[str]:
        """``command`` started inside this run's groups, niced."""
        joins = [str(folder / "cgroup.procs") for folder in self.folders]
        return [_tool("sh"), "-c", ENTER, _tool("nice"), *joins, "--", *command]

    def cpu_time(self, leader: int) -> CpuTime | None:
        """What the run's processes had of the CPU (a new group starts at zero), with the time its first process
        ``leader`` (alive, or not yet reaped) waited for one before it joined; None where it is not kept."""
        if self.accounts is None:
            return None
        waited = _stalled_us(_read(self.accounts / "cpu.pressure"))
        used = _usage_us(_read(self.accounts / "cpu.stat"))
        if waited is None or used is None:
            return None
        return CpuTime(waited / 1e6 + _run_delay(leader), used / 1e6)

    def cpu_wanted(self) -> float | None:
        """Seconds in which the run's processes ran or waited for a CPU, so far; None where it is not kept."""
        if self.accounts is None:
            return None
        used, waited = _usage_us(_read(self.accounts / "cpu.stat")), _stalled_us(_read(self.accounts / "cpu.pressure"))
        return (used + waited) / 1e6 if used is not None and waited is not None else None

    def memory_used(self) -> int | None:
        """Bytes of memory the run's processes hold now; None where it is not kept."""
        counted = self.events.get("memory")  # the group that bounds its memory, v2 or v1
        if counted is None:
            return None
        for name in ("memory.current", "memory.usage_in_bytes"):
            if (held := _read(counted.parent / name).strip()).isdigit():
                return int(held)
        return None

    def pids(self) -> list[int]:
        """The run's processes now (its first group's), at most :data:`PIDS_READ` of them."""
        listed = _read(self.folders[0] / "cgroup.procs").split() if self.folders else []
        return [int(pid) for pid in listed[:PIDS_READ] if pid.isdigit()]

    def limits_hit(self) -> list[str]:
        """The limits its processes ran into so far: "processes" (a fork refused), "memory" (a process killed)."""
        counters = {"processes": "max", "memory": "oom_kill"}
        return [limit for limit, events in self.events.items() if _counted(_read(events), counters[limit])]

    def close(self) -> None:
        """Kill every process still in the run's groups (one that left the script's session too), then remove
        them and, when empty, their parent (never a hierarchy's root). On a crowded machine the killed can take
        seconds to leave: each group is tried until it goes, within EMPTY_WAIT."""
        deadline = time.monotonic() + EMPTY_WAIT
        for folder in reversed(self.folders):
            while not _removed(folder) and time.monotonic() < deadline:
                for pid in _read(folder / "cgroup.procs").split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.01)  # the bounded wait for the kernel to move the killed out
            if owner(folder.parent) is not None or folder.parent.name == PARENT:
                with contextlib.suppress(OSError):
                    folder.parent.rmdir()  # busy while another run's group is in it
        self.folders, self.events = [], {}


def roots(where: Hierarchies) -> list[Path]:
    """The hierarchies' roots the grader makes groups in."""
    return [root for root in (where.cpu, where.pids, where.unified, where.memory) if root is not None]


def grading() -> str:
    """The name of this grading's parent group (a grading is one grader process)."""
    return f"{PARENT}-{os.getpid()}"


def _removed(folder: Path) -> bool:
    """Whether ``folder`` is gone: removed now, or already (it is removed only once it is empty)."""
    try:
        folder.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def starved(cpu: CpuTime | None, duration: float) -> bool:
    """Whether a run of ``duration`` seconds that had ``cpu`` of the CPU was starved by the machine: it waited
    for a CPU a good share of the time, and had little of one."""
    if cpu is None or duration <= 0:
        return False
    return cpu.waited >= STARVED_SHARE * duration and cpu.used < FED_SHARE * duration
