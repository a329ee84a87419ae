"""The sandbox learner scripts run in: bubblewrap's allowlisted root (:mod:`pytest_gpulab.bwrap`),
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
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .bwrap import Exposure, Layout, command_line, script_environment, write_etc

__all__ = ["Exposure", "Layout", "ResourceLimits", "Sandbox", "probe", "snapshot", "tool_paths"]

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
    """What this machine lets the grader enforce on a script, and how to wrap one's command.

    ``mode`` is ``"root"`` (bubblewrap run by a root grader, the script dropped to ``user``),
    ``"userns"`` (bubblewrap in a user namespace: no privilege needed) or ``"none"`` (no sandbox
    could be made: the script runs with ``prlimit`` alone, and ``missing`` says so)."""

    mode: str
    user: tuple[int, int] | None  # uid and gid scripts run as, in "root" mode
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    missing: tuple[str, ...] = ()  # protections this machine cannot give, for the header and the report
    bwrap: str = "bwrap"

    @property
    def namespaces(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        if not self.missing:
            how = "as nobody" if self.mode == "root" else "in a user namespace, without privilege"
            return (
                f"learner scripts run sandboxed ({how}: own PID, mount and network namespaces, an allowlisted "
                "read-only root, loopback only, the cluster through a read-only view, limits)"
            )
        return f"learner scripts run with reduced protection: {'; '.join(self.missing)}"

    def wrap(self, command: Sequence[str], layout: Layout, env: Mapping[str, str]) -> list[str]:
        """``command`` run in the sandbox ``layout`` describes, with ``env``'s allowlisted names."""
        confined = [*self.limits.prlimit(), *command]
        if self.user is not None:
            uid, gid = self.user
            confined = [
                "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
                "--inh-caps=-all", "--bounding-set=-all", "--", *confined,
            ]  # fmt: skip
        if not self.namespaces:
            return confined
        return command_line(self.mode == "root", layout, env, confined, self.bwrap)

    def environment(self, layout: Layout, env: Mapping[str, str]) -> dict[str, str]:
        """The environment to start the wrapped command with: in a sandbox, only the allowlisted names."""
        return script_environment(env, layout) if self.namespaces else dict(env)


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
    limits_only = ("no sandbox: bubblewrap could not make namespaces here (scripts see the grader's files, "
                   "processes and network, and may write what the grader's user may)")  # fmt: skip
    tools = all(shutil.which(tool) for tool in ("setpriv", "prlimit"))
    bwrap = shutil.which("bwrap")
    as_root = os.geteuid() == 0
    user = _unprivileged_user() if as_root and tools else None
    if bwrap is None or not tools:
        return Sandbox("none", user, missing=(limits_only + "; install bubblewrap and util-linux",))
    mode = "root" if as_root and user is not None else "userns"
    candidate = Sandbox(mode, user if mode == "root" else None, bwrap=bwrap)
    if _works(candidate):
        return candidate
    missing = [limits_only]
    if as_root and user is None:
        missing.append("scripts run as root")
    return Sandbox("none", user, missing=tuple(missing), bwrap=bwrap)


def _works(candidate: Sandbox) -> bool:
    """Whether ``true`` runs in the sandbox ``candidate`` would make (the whole chain, setpriv included)."""
    with tempfile.TemporaryDirectory(prefix="gpulab-probe-") as folder:
        layout = Layout((), (Path("/tmp"),), Path("/"), write_etc(Path(folder)))
        command = candidate.wrap(["true"], layout, {"PATH": "/usr/bin:/bin"})
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


def _unprivileged_user() -> tuple[int, int] | None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return nobody.pw_uid, nobody.pw_gid
