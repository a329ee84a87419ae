"""The sandbox learner scripts run in: bubblewrap's allowlisted root (:mod:`pytest_gpulab.sandbox.bwrap`),
``setpriv`` and ``prlimit``.

A script runs in PID, mount, network, IPC and UTS namespaces of its own, in a root that holds only
what it needs (the tools on PATH, the lab root's read-only snapshot, its scratch directory, the fake
``containerd``, and for a script that reads the cluster the read-only view of it): the grader's
processes, files, environment and network are not there. When the run ends its namespace's first
process dies and takes every process of the script with it (``setsid`` included).

The script runs as ``nobody``: a root grader drops to it with ``setpriv`` (no capabilities,
``no_new_privs``); any other grader needs no privilege at all, since bubblewrap then makes a user
namespace. Limits on CPU time, processes, file size and address space come from ``prlimit``.
Where bubblewrap cannot run (not installed, user namespaces refused), :func:`probe` says which
protections are missing and scripts run with what remains. Usable without pytest.
"""

from __future__ import annotations

import os
import platform
import pwd
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from . import seccomp
from .bwrap import SYSTEM_LINKS, Exposure, Layout, command_line, script_environment, write_etc

__all__ = ["Exposure", "Layout", "ResourceLimits", "Sandbox", "probe", "snapshot", "tool_paths"]

SNAPSHOT_FILE_LIMIT = 64 * 1024 * 1024  # larger learner files are left out of a script's view
SNAPSHOT_TOTAL_LIMIT = 256 * 1024 * 1024  # and files past this many bytes in all


@dataclass(frozen=True)
class ResourceLimits:
    cpu_seconds: int = 60
    processes: int = 256  # a fork bomb ends here, as that run's failure
    file_bytes: int = 64 * 1024 * 1024
    address_space_bytes: int = 4 * 1024**3  # Go's kubectl reserves much more than it uses
    memory_bytes: int = 2 * 1024**3  # in use by all its processes at once, where the grader makes control groups

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


# A root grader runs each script as a uid of its own from here (never a user of the machine), so that one
# run's processes count toward no other run's limit and share nothing keyed by uid. The range lies below
# 65536, which is what a container's user namespace maps, in Debian's band for on-demand allocation.
RUN_UIDS = range(60000, 65000)


@dataclass(frozen=True)
class Sandbox:
    """What this machine lets the grader enforce on a script, and how to wrap one's command.

    ``mode`` is ``"root"`` (bubblewrap run by a root grader, each script dropped to a uid of its own from
    ``run_uids``), ``"userns"`` (bubblewrap in a user namespace, for a grader that is not root: no
    privilege needed) or ``"none"`` (no sandbox could be made: the script runs with ``prlimit`` alone, and
    ``missing`` says so)."""

    mode: str
    run_uids: range | None = None  # "root" mode: the uids scripts run as, one per run
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    missing: tuple[str, ...] = ()  # protections this machine cannot give, for the header and the report
    bwrap: str = "bwrap"
    filter: bytes | None = field(default=None, repr=False)  # the seccomp program (pytest_gpulab.sandbox.seccomp)

    @property
    def namespaces(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        if not self.missing:
            how = "each as a uid of its own" if self.mode == "root" else "in a user namespace, without privilege"
            return (
                f"learner scripts run sandboxed ({how}: own PID, mount and network namespaces, an allowlisted "
                "read-only root, loopback only, the cluster through a read-only view, a seccomp filter, limits)"
            )
        return f"learner scripts run with reduced protection: {'; '.join(self.missing)}"

    def run_user(self) -> int | None:
        """The uid (and gid) of one run, in "root" mode: one of ``run_uids`` no account of the machine has."""
        if self.run_uids is None:
            return None
        while (uid := random.choice(self.run_uids)) in _accounts():
            pass
        return uid

    def wrap(
        self, command: Sequence[str], layout: Layout, env: Mapping[str, str], filter_fd: int | None = None
    ) -> list[str]:
        """``command`` run in the sandbox ``layout`` describes, with ``env``'s allowlisted names and the
        seccomp program readable at ``filter_fd``."""
        if self.mode == "userns" and os.geteuid() == 0:
            # A user namespace made by root maps the script to root of the machine, whose uid the kernel
            # trusts for sysctls, keyrings and process limits: never for a script.
            raise ValueError("a root grader sandboxes scripts in root mode, never in a user namespace")
        confined = [*self.limits.prlimit(), *command]
        if shutil.which("choom"):
            confined = ["choom", "-n", "1000", "--", *confined]  # the first the kernel kills when memory runs out
        if layout.run_user is not None:
            uid = layout.run_user
            confined = [
                "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                "--inh-caps=-all", "--bounding-set=-all", "--", *confined,
            ]  # fmt: skip
        if not self.namespaces:
            return confined
        return command_line(self.mode == "root", layout, env, confined, self.bwrap, filter_fd)

    def environment(self, layout: Layout, env: Mapping[str, str]) -> dict[str, str]:
        """The environment to start the wrapped command with: in a sandbox, only the allowlisted names."""
        return script_environment(env, layout) if self.namespaces else dict(env)


@cache
def _accounts() -> frozenset[int]:
    return frozenset(entry.pw_uid for entry in pwd.getpwall())


# What a tool in PREFIX/bin (or a pyenv shim in PREFIX/shims) may need beside it: its libraries, data and
# interpreter versions; never the rest of a tool's home (a registry token in ~/.cargo, a module cache in ~/go).
TOOL_HOME_PARTS = ("bin", "shims", "sbin", "lib", "lib64", "libexec", "share", "include", "versions", "plugins",
                   "version", "pyvenv.cfg")  # fmt: skip


def tool_paths(path_variable: str) -> list[Path]:
    """The directories a script's tools come from: each PATH entry (for a ``bin`` or ``shims`` one, the parts
    of its parent in TOOL_HOME_PARTS, which hold what they run), and the Python that runs the fake containerd."""
    found: list[Path] = []
    for entry in path_variable.split(os.pathsep):
        if entry and Path(entry).is_absolute() and Path(entry).is_dir():
            directory = Path(entry)
            if directory.name in ("bin", "shims") and directory.parent != Path("/"):
                found += [part for name in TOOL_HOME_PARTS if (part := directory.parent / name).exists()]
            else:
                found.append(directory)
    found += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent]
    return sorted({path for path in found if not _in_system(path)}, key=str)


def _in_system(path: Path) -> bool:
    """Whether the sandbox's root has ``path`` already: /usr, and the links into it (/bin, /lib...)."""
    return path == Path("/") or path == Path("/usr") or Path("/usr") in path.parents or str(path) in SYSTEM_LINKS


def snapshot(root: Path, into: Path) -> Path:
    """A read-only copy of the learner's directory that the script's user can read, made once per run of
    the grader: modes opened to others for reading (execute where the owner may; never writing, setuid or
    setgid: without a sandbox a script's uid could otherwise change it), special files and huge files left
    out, and no more than SNAPSHOT_TOTAL_LIMIT bytes in all (sparse files are copied whole, so their size
    counts)."""
    if into.exists():
        return into
    shutil.copytree(root, into, symlinks=True, ignore=_unsafe, copy_function=_Copier(SNAPSHOT_TOTAL_LIMIT).copy)
    for directory in [into, *(p for p in into.rglob("*") if p.is_dir() and not p.is_symlink())]:
        directory.chmod((directory.stat().st_mode | 0o755) & ~0o7022)  # a mkdtemp root is 0700: let the script in
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


class _Copier:
    """Copies files while ``left`` bytes remain; a file that would pass it is left out, as if absent."""

    def __init__(self, budget: int) -> None:
        self.left = budget

    def copy(self, source: str, target: str) -> None:
        try:
            info = os.lstat(source)
            if stat.S_ISREG(info.st_mode) and info.st_size > self.left:
                return
            shutil.copyfile(source, target, follow_symlinks=False)
        except OSError:
            return  # an unreadable file is as if absent
        if not stat.S_ISLNK(info.st_mode):
            self.left -= info.st_size
            executable = stat.S_IXOTH | stat.S_IXGRP if info.st_mode & stat.S_IXUSR else 0
            readable = (info.st_mode & 0o755) | stat.S_IROTH | stat.S_IRGRP  # the owner alone writes
            os.chmod(target, readable | executable)


def probe() -> Sandbox:
    """The protections this machine allows, tried once per process (a second caller waits for the first's)."""
    with _PROBING:
        return _probe()


_PROBING = threading.Lock()
PROBE_TIMEOUT = 10.0


@cache
def _probe() -> Sandbox:
    tools = all(shutil.which(tool) for tool in ("setpriv", "prlimit", "choom"))
    bwrap = shutil.which("bwrap")
    as_root = os.geteuid() == 0
    run_uids = RUN_UIDS if as_root and shutil.which("setpriv") else None  # never root, even without a sandbox
    seen = ("scripts run each as a uid of its own, and see the machine's processes, network and what any user "
            "may read" if run_uids else "scripts see the grader's files, processes and network, and may write "
            "what the grader's user may")  # fmt: skip
    limits_only = f"no sandbox: bubblewrap could not make namespaces here ({seen})"
    if bwrap is None or not tools:
        return Sandbox("none", run_uids, missing=(limits_only + "; install bubblewrap and util-linux",))
    filter_program = seccomp.program()
    candidate = Sandbox("root" if as_root else "userns", run_uids, bwrap=bwrap, filter=filter_program)
    if not _works(candidate):
        return Sandbox("none", run_uids, bwrap=bwrap, missing=(limits_only,))
    if filter_program is None:
        return replace(candidate, missing=(f"no seccomp filter for {platform.machine()}",))
    return candidate


def _works(candidate: Sandbox) -> bool:
    """Whether ``true`` runs in the sandbox ``candidate`` would make (the whole chain, setpriv included)."""
    with tempfile.TemporaryDirectory(prefix="gpulab-probe-") as folder:
        user = candidate.run_user()
        layout = Layout((), (Path("/tmp"),), Path("/"), write_etc(Path(folder), user), run_user=user)
        with seccomp_fd(candidate.filter) as fd:
            command = candidate.wrap(["true"], layout, {"PATH": "/usr/bin:/bin"}, fd)
            try:
                done = subprocess.run(
                    command, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT, pass_fds=_fds(fd)
                )
            except (OSError, subprocess.SubprocessError):
                return False
    return done.returncode == 0


def _fds(fd: int | None) -> tuple[int, ...]:
    return () if fd is None else (fd,)


@contextmanager
def seccomp_fd(program: bytes | None) -> Iterator[int | None]:
    """A pipe's read end holding ``program``, for ``bwrap --seccomp``; closed after the start."""
    if program is None:
        yield None
        return
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: the pipe holds them
        os.close(write)
        yield read
    finally:
        os.close(read)
