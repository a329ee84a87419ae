"""The sandbox learner scripts run in, made of util-linux's ``unshare``, ``setpriv`` and ``prlimit``.

A script runs in PID and mount namespaces of its own: the grader's processes are
not visible, so they cannot be signalled, and when the run ends its namespace's
first process dies and takes every process of the script with it (``setsid``
included). In the mount namespace:

- ``/tmp``, ``/var/tmp``, ``/dev/shm`` and every directory that an unprivileged
  user could not enter anyway (``/root``) are replaced by empty in-memory
  directories, discarded when the run ends;
- into them come back, read-only, only what a script needs: the lab root (a
  snapshot, so no learner file can be written), the tools on ``PATH`` and the
  Python that runs the fake ``containerd``; and, writable, its scratch
  directory and the fake ``containerd``'s state;
- the grading report, the graders, other learners' directories and the
  grader's cluster credentials are therefore out of sight or read-only.

Then the script runs as ``nobody`` (when the grader is root), with no
capabilities, ``no_new_privs``, and limits on CPU time, processes, file size
and address space. Where namespaces cannot be made (no privilege, a container
without them), :func:`probe` says which protections are missing and scripts
run with what remains. Usable without pytest.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ALWAYS_HIDDEN = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
SNAPSHOT_FILE_LIMIT = 64 * 1024 * 1024  # larger learner files are left out of a script's view


@dataclass(frozen=True)
class ResourceLimits:
    cpu_seconds: int = 60
    processes: int = 256  # a fork bomb ends here, as that run's failure
    file_bytes: int = 64 * 1024 * 1024
    address_space_bytes: int = 4 * 1024**3  # Go's kubectl reserves much more than it uses

    def prlimit(self) -> list[str]:
        return [
            "prlimit",
            f"--cpu={self.cpu_seconds}",
            f"--nproc={self.processes}",
            f"--fsize={self.file_bytes}",
            f"--as={self.address_space_bytes}",
            "--core=0",
            "--",
        ]


@dataclass(frozen=True)
class Sandbox:
    """What this machine lets the grader enforce on a script, and how to wrap one's command."""

    namespaces: bool
    user: tuple[int, int] | None  # uid and gid scripts run as; None: the grader's own
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    missing: tuple[str, ...] = ()  # protections this machine cannot give, for the header and the report

    def describe(self) -> str:
        if not self.missing:
            return "learner scripts run sandboxed (own PID and mount namespaces, read-only lab root, unprivileged user, limits)"
        return f"learner scripts run with reduced protection: {'; '.join(self.missing)}"

    def wrap(
        self, command: Sequence[str], exposures: Iterable[Exposure], hidden: Iterable[Path] = (), network: bool = True
    ) -> list[str]:
        """``command`` run in the sandbox, seeing ``exposures`` and nothing of ``hidden``; without ``network``
        in a network namespace of its own, where nothing of the host (the lab cluster's etcd) answers."""
        confined = [*self.limits.prlimit(), *command]
        if self.user is not None:
            uid, gid = self.user
            confined = [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={gid}",
                "--clear-groups",
                "--no-new-privs",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
                *confined,
            ]
        if not self.namespaces:
            return confined
        setup = mount_script(list(exposures), hidden)
        unshare = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--propagation=private"]
        unshare += [] if network else ["--net"]
        # sh stays the namespace's first process: a script that kills its parent ends its own run.
        return [*unshare, "--", "sh", "-c", setup + ' && "$@"', "gpulab-sandbox", *confined]


@dataclass(frozen=True)
class Exposure:
    """A path the script sees at ``target``: ``source``'s contents, read-only or writable."""

    source: Path
    target: Path
    read_only: bool = True


def _enterable(path: Path) -> bool:
    """Whether anyone may pass through this directory (the others' execute bit)."""
    try:
        return bool(path.stat().st_mode & stat.S_IXOTH)
    except OSError:
        return False


def hide_points(targets: Iterable[Path], also: Iterable[Path] = ()) -> list[Path]:
    """Where an empty directory goes: the /tmp-like places, ``also``, and the topmost directory above a
    target that others may not enter; none inside another."""
    points = {*ALWAYS_HIDDEN, *also}
    for path in targets:
        top = next((a for a in reversed(path.parents) if a != Path("/") and not _enterable(a)), None)
        if top is not None:
            points.add(top)
    kept = [p for p in points if p.is_dir() and not any(other in p.parents for other in points)]
    return sorted(kept, key=lambda p: len(p.parts))


def _under_any(path: Path, points: Iterable[Path]) -> bool:
    return any(path == point or point in path.parents for point in points)


def _stage_directory() -> Path:
    """An existing directory outside every hidden place, covered while the view is built, then uncovered."""
    return next((p for p in (Path("/mnt"), Path("/media"), Path("/srv"), Path("/opt")) if p.is_dir()), Path("/mnt"))


def mount_script(exposures: list[Exposure], hidden_too: Iterable[Path] = ()) -> str:
    """The shell commands, run as root inside the new mount namespace, that build the script's view."""
    by_target: dict[Path, Exposure] = {}
    for exposure in exposures:  # the same place twice: writable if either is
        known = by_target.get(exposure.target)
        by_target[exposure.target] = exposure if known is None or known.read_only else known
    exposures = list(by_target.values())
    plain = [e.target for e in exposures if e.read_only and e.source == e.target]
    exposures = [  # a read-only folder inside another one comes with it
        e for e in exposures if not (e.read_only and e.source == e.target and any(p in e.target.parents for p in plain))
    ]
    hidden = hide_points([e.target for e in exposures], hidden_too)
    bound = [e for e in exposures if not e.read_only or e.source != e.target or _under_any(e.target, hidden)]
    bound.sort(key=lambda e: len(e.target.parts))  # a folder before what is bound inside it
    stage = _stage_directory()
    lines = [f"mount -t tmpfs -o size=1m,mode=0700 gpulab-stage {q(stage)}"]
    for index, exposure in enumerate(bound):
        lines += [
            _make(stage / str(index), exposure.source.is_dir()),
            f"mount --bind {q(exposure.source)} {q(stage / str(index))}",
        ]
    lines += [f"mount -t tmpfs -o size=64m,mode=1777 gpulab-hidden {q(point)}" for point in hidden]
    for index, exposure in enumerate(bound):
        lines += [
            _make(exposure.target, exposure.source.is_dir()),
            f"mount --bind {q(stage / str(index))} {q(exposure.target)}",
        ]
        if exposure.read_only:
            lines.append(f"mount -o remount,bind,ro {q(exposure.target)}")
    lines.append(f"umount -l {q(stage)}")
    return " && ".join(lines)


def _make(path: Path, directory: bool) -> str:
    if directory:
        return f"mkdir -p {q(path)}"
    return f"mkdir -p {q(path.parent)} && touch {q(path)}"


def q(path: Path) -> str:
    return shlex.quote(str(path))


def tool_paths(path_variable: str) -> list[Path]:
    """The directories a script's tools come from: each PATH entry (a ``bin`` or ``shims`` one with its
    parent, which holds what they run), and the Python that runs the fake containerd."""
    found: list[Path] = []
    for entry in path_variable.split(os.pathsep):
        if entry and Path(entry).is_absolute() and Path(entry).is_dir():
            directory = Path(entry)
            found.append(directory.parent if directory.name in ("bin", "shims") else directory)
    found += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent]
    return sorted(set(found), key=str)


def snapshot(root: Path, into: Path) -> Path:
    """A read-only copy of the learner's directory that ``nobody`` can read, made once per run of the
    grader: modes opened to others (execute where the owner may), special files and huge files left out."""
    if into.exists():
        return into
    shutil.copytree(root, into, symlinks=True, ignore=_unsafe, copy_function=_copy_open)
    for directory in [into, *(p for p in into.rglob("*") if p.is_dir() and not p.is_symlink())]:
        directory.chmod(directory.stat().st_mode | 0o755)  # a mkdtemp root is 0700: let the script in
    return into


def _unsafe(directory: str, names: list[str]) -> list[str]:
    left_out = []
    for name in names:
        try:
            info = os.lstat(os.path.join(directory, name))
        except OSError:
            left_out.append(name)
            continue
        special = not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode))
        if (
            special
            or (stat.S_ISREG(info.st_mode) and info.st_size > SNAPSHOT_FILE_LIMIT)
            or (stat.S_ISDIR(info.st_mode) and not os.access(os.path.join(directory, name), os.R_OK | os.X_OK))
        ):
            left_out.append(name)
    return left_out


def _copy_open(source: str, target: str) -> None:
    try:
        shutil.copyfile(source, target, follow_symlinks=False)
    except OSError:
        return  # an unreadable file is as if absent
    mode = os.lstat(source).st_mode
    if not stat.S_ISLNK(mode):
        executable = stat.S_IXOTH | stat.S_IXGRP if mode & stat.S_IXUSR else 0
        os.chmod(target, (mode & 0o7777) | stat.S_IROTH | stat.S_IRGRP | executable)


@cache
def probe() -> Sandbox:
    """The protections this machine allows, tried once per process."""
    missing = []
    tools = all(shutil.which(tool) for tool in ("unshare", "setpriv", "prlimit", "mount"))
    namespaces = tools and _stage_directory().is_dir() and _namespaces_work()
    if not namespaces:
        missing.append("no PID or mount namespace (scripts see and may signal the grader, and may write the lab root)")
    user = _unprivileged_user() if os.geteuid() == 0 and shutil.which("setpriv") else None
    if user is None and os.geteuid() == 0:
        missing.append("scripts run as root")
    return Sandbox(namespaces, user, missing=tuple(missing))


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _unprivileged_user() -> tuple[int, int] | None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return nobody.pw_uid, nobody.pw_gid
