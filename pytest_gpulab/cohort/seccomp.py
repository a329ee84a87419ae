"""The Localhost seccomp profile the Job's Pods need on a containerd node, derived from a base profile.

containerd's RuntimeDefault refuses the sandbox's namespaces to a container without ``CAP_SYS_ADMIN``
(``clone`` with namespace flags, ``unshare``, ``mount``, ``umount2``, ``pivot_root``); CRI-O's allows them.
:func:`containerd_like` is a base profile (containers-common's, podman's and CRI-O's default) cut as
containerd's ``contrib/seccomp`` cuts its default for such a container; :func:`bwrap_localhost` is that plus
exactly what bubblewrap needs, each addition shown needed by ``scripts/measure-sandbox-context``.

``gpulab job-seccomp-profile > bwrap-localhost.json`` writes it; install it in each node's
``/var/lib/kubelet/seccomp/`` and pass its name to ``gpulab job-manifest --seccomp-profile``.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

CONTAINERS_COMMON = Path("/usr/share/containers/seccomp.json")  # Debian's containers-common (podman's)
NS_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWCGROUP
# What containerd's default allows only with CAP_SYS_ADMIN (pivot_root never; chroot with CAP_SYS_CHROOT).
SYS_ADMIN = {
    "bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick", "lookup_dcookie", "mount",
    "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl", "quotactl_fd", "setdomainname",
    "sethostname", "setns", "syslog", "umount", "umount2", "unshare", "pivot_root", "chroot",
}  # fmt: skip
BWRAP_NEEDS = ["clone", "unshare", "mount", "umount2", "pivot_root"]


def _strip(profile: dict[str, Any], names: set[str]) -> None:
    """Drop ``names`` from the rules that do not depend on a capability."""
    for rule in profile["syscalls"]:
        if rule.get("includes", {}).get("caps") or rule.get("excludes", {}).get("caps"):
            continue
        rule["names"] = [name for name in rule["names"] if name not in names]
    profile["syscalls"] = [rule for rule in profile["syscalls"] if rule["names"]]


def containerd_like(base: dict[str, Any]) -> dict[str, Any]:
    profile = copy.deepcopy(base)
    _strip(profile, SYS_ADMIN)
    profile["defaultErrnoRet"] = 1
    profile["defaultErrno"] = "EPERM"  # podman reads this name before defaultErrnoRet
    profile["syscalls"] += [
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": NS_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    ]  # fmt: skip
    return profile


def bwrap_localhost(base: dict[str, Any], needs: list[str] = BWRAP_NEEDS) -> dict[str, Any]:
    """containerd-like, with ``needs`` allowed (clone then with any flags)."""
    profile = containerd_like(base)
    if "clone" in needs:
        profile["syscalls"] = [rule for rule in profile["syscalls"] if rule["names"] != ["clone"]]
    profile["syscalls"].append({"names": list(needs), "action": "SCMP_ACT_ALLOW"})
    return profile


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_gpulab.cohort.seccomp [BASE]``: the profile on stdout."""
    args = sys.argv[1:] if argv is None else argv
    base = Path(args[0]) if args else CONTAINERS_COMMON
    if not base.is_file():
        print(f"gpulab: no base seccomp profile at {base} (Debian's containers-common installs it)", file=sys.stderr)
        return 1
    json.dump(bwrap_localhost(json.loads(base.read_text())), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
