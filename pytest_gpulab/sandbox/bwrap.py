"""The bubblewrap (``bwrap``) command line a learner script runs under: a new root built from an allowlist.

bubblewrap is Flatpak's sandbox, kept by the same people and packaged by Debian; it builds the
script's root from nothing, so what is not listed here does not exist for the script. That root
holds:

- ``/usr`` (and the ``/bin``, ``/lib``... links into it), read-only, and a few files of ``/etc``
  that tools read (the dynamic linker's cache, ``alternatives``), with a ``passwd`` and a ``group``
  that name only root and nobody;
- a new ``/proc`` of the script's own PID namespace and a minimal ``/dev``;
- the run's exposures (the lab root's snapshot, the tools on PATH, the fake containerd), each
  read-only unless the grader says otherwise, at the paths the script expects;
- blanks: ``/tmp``-like places and the scratch directory, empty, writable, bounded in size, and
  thrown away with the run.

Namespaces: PID, mount, network, IPC and UTS always. A root grader runs bwrap as root with every
capability dropped but those ``setpriv`` needs to become ``nobody``; any other grader runs it in a
user namespace of its own (no privilege needed), where the script is uid 65534 and cannot make
another user namespace. The network namespace has only loopback. A script that reads the cluster
finds there ``127.0.0.1:FORWARD_PORT``, served by :mod:`pytest_gpulab.sandbox.forward` in front of the
grader's read-only view of the cluster (a Unix socket bound in at ``/run/gpulab``): the only door out.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cluster.environ import SHORT_LIVED_GO

BLANK_BYTES = 64 * 1024 * 1024
FORWARD_PORT = 8001
RUN_DIR = Path("/run/gpulab")
SOCKET_INSIDE = RUN_DIR / "cluster.sock"
KUBECONFIG_INSIDE = RUN_DIR / "kubeconfig"
FORWARDER_INSIDE = RUN_DIR / "forward.py"
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_KEPT = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "localtime", "timezone",
    "hosts", "host.conf", "services", "protocols", "inputrc", "terminfo", "python3",
    f"python3.{sys.version_info.minor}",
)  # fmt: skip
# The environment a script gets: these names of the grader's, nothing else (no tokens, no settings).
KEPT_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "KUBECONFIG")
PASSWD = "root:x:0:0:root:/root:/bin/sh\nlearner:x:{uid}:{uid}:learner:/nonexistent:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nlearner:x:{uid}:\n"
USERNS_UID = 65534  # the script's uid inside a user namespace
ROOT_NAMESPACES = (
    "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
)  # fmt: skip
USER_NAMESPACES = ("--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534")


@dataclass(frozen=True)
class Exposure:
    """A path the script sees at ``target``: ``source``'s contents, read-only or writable."""

    source: Path
    target: Path
    read_only: bool = True


@dataclass(frozen=True)
class Layout:
    """What one run sees, besides the system: its exposures, its blanks, where it starts, and, for a
    script that reads the cluster, the view's Unix socket and the kubeconfig that names the forwarder."""

    exposures: tuple[Exposure, ...]
    blanks: tuple[Path, ...]
    cwd: Path
    etc: Path  # a folder holding the passwd and group files the script sees
    cluster_socket: Path | None = None
    kubeconfig: Path | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    run_user: int | None = None  # root mode: the uid the script runs as


def write_etc(folder: Path, uid: int | None) -> Path:
    """The passwd and group a script sees, naming root and the script's own user (``learner``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("passwd", PASSWD), ("group", GROUP)):
        (folder / name).write_text(text.format(uid=USERNS_UID if uid is None else uid))
        (folder / name).chmod(0o644)
    return folder


def _system(etc: Path) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in map(Path, SYSTEM_LINKS):
        if link.is_symlink():
            args += ["--symlink", str(link.readlink()), str(link)]
        elif link.is_dir():
            args += ["--ro-bind", str(link), str(link)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_KEPT:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind", str(etc / "passwd"), "/etc/passwd", "--ro-bind", str(etc / "group"), "/etc/group"]
    return [*args, "--proc", "/proc", "--dev", "/dev"]


def _blank(path: Path) -> list[str]:
    return ["--perms", "1777", "--size", str(BLANK_BYTES), "--tmpfs", str(path)]


def _mounts(layout: Layout) -> list[str]:
    """Blanks and exposures, a folder before what goes inside it; the folders leading to them made 0755
    (bubblewrap would make some 0700, out of the script's reach), or 1777 inside a writable place."""
    places: list[tuple[Path, list[str]]] = [(blank, _blank(blank)) for blank in layout.blanks]
    for seen in layout.exposures:
        places.append((seen.target, ["--ro-bind" if seen.read_only else "--bind", str(seen.source), str(seen.target)]))
    if layout.kubeconfig is not None:  # without a socket, nothing answers there: an unreachable API server
        bound = [(layout.kubeconfig, KUBECONFIG_INSIDE)]
        if layout.cluster_socket is not None:
            bound += [
                (layout.cluster_socket, SOCKET_INSIDE),
                (Path(__file__).with_name("forward.py"), FORWARDER_INSIDE),
            ]
        places += [(target, ["--ro-bind", str(source), str(target)]) for source, target in bound]
    writable = [*layout.blanks, *(seen.target for seen in layout.exposures if not seen.read_only)]
    for folder in _leading_folders(layout, places):
        # Inside a writable place ($HOME, a scratch) the script may add its own beside a tool's folder (~/.cache):
        # sticky and open to all, as /tmp is; elsewhere only entered.
        perms = "1777" if any(place in folder.parents for place in writable) else "0755"
        places.append((folder, ["--perms", perms, "--dir", str(folder)]))
    places.sort(key=lambda place: len(place[0].parts))
    return [arg for _, args in places for arg in args]


def _leading_folders(layout: Layout, places: list[tuple[Path, list[str]]]) -> set[Path]:
    """The folders above each mount that nothing else mounts, outside every read-only exposure."""
    targets = {target for target, _ in places}
    sealed = [seen.target for seen in layout.exposures if seen.read_only]
    folders = {parent for target in targets for parent in target.parents if parent != Path("/")}
    return {
        folder for folder in folders
        if folder not in targets and not any(inside in folder.parents for inside in sealed)
    }  # fmt: skip


def script_environment(env: Mapping[str, str], layout: Layout) -> dict[str, str]:
    """The allowlisted names of ``env``, and the view's kubeconfig for a script that reads the cluster.
    bubblewrap itself is started with it too: its first process, which the script may read in /proc,
    keeps the environment it was given."""
    kept = {name: env[name] for name in KEPT_ENV if env.get(name)}
    kept.update(layout.extra_env)
    kept.pop("KUBECONFIG", None)
    if layout.kubeconfig is not None:
        kept["KUBECONFIG"] = str(KUBECONFIG_INSIDE)
        kept.update(SHORT_LIVED_GO)  # its kubectl calls: far below the run's address-space limit
    return kept


def _environment(env: Mapping[str, str], layout: Layout) -> list[str]:
    args = ["--clearenv"]
    for name, value in sorted(script_environment(env, layout).items()):
        args += ["--setenv", name, value]
    return args


def command_line(
    as_root: bool, layout: Layout, env: Mapping[str, str], inner: Sequence[str], bwrap: str, filter_fd: int | None
) -> list[str]:
    """``inner`` (already confined by setpriv and prlimit) in a sandbox of ``layout``, under the seccomp
    program bubblewrap reads from ``filter_fd``."""
    namespaces = ROOT_NAMESPACES if as_root else USER_NAMESPACES
    command = list(inner)
    if layout.cluster_socket is not None and layout.kubeconfig is not None:
        forward = [sys.executable, "-I", "-S", str(FORWARDER_INSIDE), str(SOCKET_INSIDE), str(FORWARD_PORT), "--"]
        command = forward + command
    return [
        bwrap, *namespaces, "--die-with-parent", "--new-session",
        *(["--seccomp", str(filter_fd)] if filter_fd is not None else []),
        *_system(layout.etc), *_mounts(layout), *_environment(env, layout),
        "--chdir", str(layout.cwd), "--", *command,
    ]  # fmt: skip


def view_kubeconfig(folder: Path) -> Path:
    """The kubeconfig a script inside reads: the forwarder's address on the sandbox's own loopback."""
    path = folder / "kubeconfig"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        server = f"http://127.0.0.1:{FORWARD_PORT}"
        written = folder / f".kubeconfig.{threading.get_ident()}"
        written.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: view\n"
            f"clusters:\n- name: view\n  cluster:\n    server: {server}\n"
            "users:\n- name: view\n  user: {}\n"
            "contexts:\n- name: view\n  context:\n    cluster: view\n    user: view\n"
        )
        written.chmod(0o644)
        written.replace(path)  # whole, whichever run writes it first
    return path


def blanks_for(
    lab_root: Path | None, home: str | None, scratch: Path, exposures: Iterable[Exposure]
) -> tuple[Path, ...]:
    """The writable, empty places: the /tmp-like ones, the scratch directory, the folder above the lab
    root (where the other learners' folders would be) and the grader's home, unless a tool lives there."""
    found = {Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), scratch}
    if lab_root is not None and lab_root.parent != Path("/"):
        found.add(lab_root.parent)
    targets = [seen.target for seen in exposures]
    if home and Path(home).is_absolute() and Path(home) != Path("/"):
        home_path = Path(home)
        if not any(target == home_path or target in home_path.parents for target in targets):
            found.add(home_path)
    return tuple(sorted(found, key=lambda p: (len(p.parts), str(p))))
