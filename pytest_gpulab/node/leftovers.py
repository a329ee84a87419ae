"""What a real node could leave on the machine, found and removed: its cgroups, its bridge, its mounts and
processes (which its namespaces take with them), its folder."""

from __future__ import annotations

import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_mounts() -> list[Path]:
    """Every cgroup hierarchy this machine mounts: the v1 controllers' and the unified one, or v2 alone."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        mount_point, fs_type = left.split()[4], right.split()[0]
        if fs_type in ("cgroup", "cgroup2") and mount_point.startswith(str(CGROUP_ROOT)):
            found.append(Path(mount_point))
    return found


def _groups(name: str) -> list[Path]:
    return [mount / name for mount in cgroup_mounts() if (mount / name).is_dir()]


def remove_cgroups(name: str, timeout: float) -> None:
    """Remove the node's cgroup, and every group below it, in each hierarchy: deepest first, each tried until it
    is empty (a killed process leaves its group a moment after it dies), within ``timeout``."""
    deadline = time.monotonic() + timeout
    for top in _groups(name):
        for group in sorted((path for path in top.rglob("*") if path.is_dir()), key=lambda p: -len(p.parts)):
            _rmdir_patiently(group, deadline)
        _rmdir_patiently(top, deadline)


def _rmdir_patiently(group: Path, deadline: float) -> None:
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # named by leftovers()
            time.sleep(0.05)


def bridge_exists(bridge: str) -> bool:
    return Path("/sys/class/net", bridge).exists()


def _processes_in(name: str) -> list[str]:
    found = []
    for group in _groups(name):
        for procs in group.rglob("cgroup.procs"):
            found += procs.read_text().split()
    return sorted(set(found))


def _mounts_under(folder: Path) -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line.split()[4] for line in text.splitlines() if line.split()[4].startswith(str(folder))]


def leftovers(cgroup: str, bridge: str, folder: Path) -> list[str]:
    """A sentence for each thing of the node still on the machine; empty when nothing is."""
    found = [f"process {pid} in the node's cgroups" for pid in _processes_in(cgroup)]
    found += [f"cgroup {group}" for group in _groups(cgroup)]
    found += [f"mount {mount}" for mount in _mounts_under(folder)]
    if bridge_exists(bridge):
        found.append(f"network device {bridge}")
    if folder.exists():
        found.append(f"folder {folder}")
    found += [f"process {pid}, whose command line names {folder}" for pid in _naming(folder)]
    return found


def _naming(folder: Path) -> list[str]:
    """Processes with an argument in ``folder`` (the node's containerd and kubelet are started so)."""
    inside, found = f"{folder}/", []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            arguments = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(inside in argument.decode(errors="replace") for argument in arguments):
            found.append(cmdline.parent.name)
    return found
