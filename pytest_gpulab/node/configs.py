"""What a real node's containerd, CNI and kubelet are told: each choice a named option, each with its reason.

Every path is below the node's own folder, and the kubelet's and containerd's defaults that would write
elsewhere on the machine (``/run/containerd``, ``/var/log``) are covered by tmpfs mounts in the node's own
mount namespace (``lifecycle.py``): nothing of a node is left on the machine once it is down.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAUSE_IMAGE = "localhost/gpulab-pause:3.10.2"  # kubernetes' own pause.c, built by `gpulab build --node`


def cgroup_v1() -> bool:
    """Whether the machine's cgroups are v1 or hybrid (no cgroup2 at /sys/fs/cgroup), as the kubelet tells."""
    return not Path("/sys/fs/cgroup/cgroup.controllers").exists()


@dataclass(frozen=True)
class NodeOptions:
    """The choices a node is made with. README, "A real node", says why each is there."""

    # containerd's CRI gives the Pod sandbox oomScoreAdj -998; lowering a score needs CAP_SYS_RESOURCE, which
    # a machine's root may lack (this one's does): clamp the score to containerd's own instead of failing.
    restrict_oom_score_adj: bool = True
    # kubelet >= 1.35 refuses cgroups v1 unless told; None: false where the machine has v1 (or hybrid) cgroups.
    fail_cgroup_v1: bool | None = None
    # Podman images loaded into the node's containerd before the kubelet starts (the grader's, for the Job).
    images: tuple[str, ...] = ()
    # Localhost seccomp profiles installed on the node: name (as a Pod's localhostProfile) -> file.
    seccomp_profiles: dict[str, Path] = field(default_factory=dict)
    # The Pods' network: a CNI bridge of the node's own, no masquerade, no iptables, no kube-proxy; None: a /24 of
    # 10.89.0.0/16 chosen by the node's name, so that two nodes on one machine do not share one.
    pod_subnet: str | None = None
    # Seconds the node has to register and become Ready.
    ready_timeout: float = 120.0

    def fails_on_cgroup_v1(self) -> bool:
        return (not cgroup_v1()) if self.fail_cgroup_v1 is None else self.fail_cgroup_v1


@dataclass(frozen=True)
class NodePaths:
    """The node's folder and what lives in it."""

    root: Path

    def __getattr__(self, name: str) -> Path:
        if name not in _LAYOUT:
            raise AttributeError(name)
        return self.root / _LAYOUT[name]


# The node's folder as containerd, the kubelet and runc see it: bound at a path of the node's own mount namespace
# (on its own tmpfs /run) that a Pod's user-namespaced root can walk through, wherever the folder is (a home or a
# test's temporary folder is 0700: runc's init, as the Pod's root, could not reach the container's root there).
INSIDE = Path("/run/gpulab-node")

_LAYOUT = {
    "state": "node.json",
    "containerd_config": "containerd/config.toml",
    "containerd_root": "containerd/root",
    "containerd_state": "containerd/state",
    "socket": "containerd.sock",
    "cni_conf": "cni/net.d",
    "cni_ipam": "cni/ipam",
    "kubelet_config": "kubelet/config.yaml",
    "kubelet_root": "kubelet/root",
    "pod_logs": "kubelet/pod-logs",
    "volume_plugins": "kubelet/volume-plugins",
    "images": "images",
    "logs": "logs",
    "inner": "inner.sh",
    "kubeconfig": "kubeconfig",
}


def _toml(value: object) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def containerd_config(paths: NodePaths, options: NodeOptions, bin_dir: Path, cni_bin: Path) -> str:
    """containerd 2.x's configuration (version 3)."""
    cri_runtime = "plugins.'io.containerd.cri.v1.runtime'"
    sections: dict[str, dict[str, object]] = {
        "plugins.'io.containerd.server.v1.grpc'": {"address": str(paths.socket)},
        "plugins.'io.containerd.server.v1.ttrpc'": {"address": f"{paths.socket}.ttrpc"},
        "plugins.'io.containerd.internal.v1.opt'": {"path": str(paths.root / "containerd" / "opt")},
        "plugins.'io.containerd.cri.v1.images'.pinned_images": {"sandbox": PAUSE_IMAGE},
        cri_runtime: {
            "restrict_oom_score_adj": options.restrict_oom_score_adj,
            # the Pods' network namespaces are bind-mounted in the node's state, not in /run/netns
            "netns_mounts_under_state_dir": True,
            "cdi_spec_dirs": [],
        },
        f"{cri_runtime}.containerd.runtimes.runc.options": {"BinaryName": str(bin_dir / "runc")},
        f"{cri_runtime}.cni": {"bin_dirs": [str(cni_bin)], "conf_dir": str(paths.cni_conf)},
    }
    lines = [
        "version = 3",
        f"root = {_toml(str(paths.containerd_root))}",
        f"state = {_toml(str(paths.containerd_state))}",
        # NRI would listen in /var/run/nri; no plugin of the node uses it
        'disabled_plugins = ["io.containerd.nri.v1.nri"]',
    ]
    for section, values in sections.items():
        lines += ["", f"[{section}]", *(f"{key} = {_toml(value)}" for key, value in values.items())]
    return "\n".join(lines) + "\n"


def cni_config(paths: NodePaths, options: NodeOptions, bridge: str) -> dict[str, Any]:
    subnet = options.pod_subnet or f"10.89.{int(hashlib.sha256(bridge.encode()).hexdigest(), 16) % 256}.0/24"
    return {
        "cniVersion": "1.0.0",
        "name": "gpulab-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,  # the Pods reach the node, not past it
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],  # an API server in the Pod needs a default route
                    "dataDir": str(paths.cni_ipam),
                },
            }
        ],
    }


def kubelet_config(paths: NodePaths, options: NodeOptions, cgroup_root: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": options.fails_on_cgroup_v1(),
        "cgroupDriver": "cgroupfs",  # no systemd here
        "cgroupRoot": cgroup_root,  # the node's Pods under a cgroup of its own, removed with it
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        # No kubelet API: nothing reaches the node's Pods through it (logs and exec go through the API server).
        "enableServer": False,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "podLogsDir": str(paths.pod_logs),
        "volumePluginDir": str(paths.volume_plugins),
        "failSwapOn": False,
        "protectKernelDefaults": False,
        # A test machine's disk may be nearly full: the node keeps its Pods rather than evicting them for it.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,  # the loaded images are the only copies: never collected
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "featureGates": {"UserNamespacesSupport": True},  # hostUsers: false
    }
