"""``gpulab node``: a real node for a lab cluster, to run the grading Job's Pods on this machine.

gpulab node up NAME --lab gpuop --image localhost/pytest-gpulab:dev   join a node to `gpulab up gpuop`'s cluster
gpulab node down NAME                                               remove it, and everything it made

As root, with the node's binaries built (``gpulab build --node``). The node's folder is
``~/.cache/pytest-gpulab/nodes/NAME``; its logs are in ``logs/`` there while it is up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .cluster import toolchain
from .cluster.toolchain import up_kubeconfig
from .node import ImageError, NodeError, NodeOptions, RealNode


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def node_folder(name: str) -> Path:
    return toolchain.cache_root() / "nodes" / name


def _node(args: argparse.Namespace, kubeconfig: Path) -> RealNode:
    bin_dir = toolchain.bin_dir()
    return RealNode(args.name, kubeconfig, node_folder(args.name), toolchain.node_bin_dir(), bin_dir / "kubectl")


def _profiles(pairs: list[str]) -> dict[str, Path]:
    profiles = {}
    for pair in pairs:
        name, equals, path = pair.partition("=")
        if not equals or not name or not Path(path).is_file():
            raise NodeError(f"--seccomp-profile {pair!r}: give NAME=FILE, FILE an existing seccomp profile")
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise NodeError(f"--seccomp-profile {pair!r}: NAME is a path inside the kubelet's seccomp folder")
        profiles[name] = Path(path)
    return profiles


def cmd_node_up(args: argparse.Namespace) -> int:
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else up_kubeconfig(args.lab) if args.lab else None
    if kubeconfig is None or not kubeconfig.is_file():
        print("gpulab node up: give the cluster with --lab LAB (its `gpulab up`) or --kubeconfig FILE", file=sys.stderr)
        return 2
    options = NodeOptions(
        restrict_oom_score_adj=not args.no_restrict_oom_score_adj,
        fail_cgroup_v1={"auto": None, "true": True, "false": False}[args.fail_cgroup_v1],
        images=tuple(args.image or ()),
        seccomp_profiles=_profiles(args.seccomp_profile or []),
    )
    toolchain.build(say=_say, node=True)
    node = _node(args, kubeconfig).up(options, say=_say, outlives_caller=True)  # until `gpulab node down`
    print(f"node {node.name} is Ready; `gpulab node down {node.name}` removes it", file=sys.stderr)
    return 0


def cmd_node_down(args: argparse.Namespace) -> int:
    folder = node_folder(args.name)
    if not folder.exists():
        print(f"no node {args.name} is up", file=sys.stderr)
        return 0
    node = RealNode.of_folder(args.name, folder, toolchain.node_bin_dir(), toolchain.bin_dir() / "kubectl")
    left = node.down()
    for thing in left:
        print(f"gpulab node down: left on the machine: {thing}", file=sys.stderr)
    print(f"node {args.name} is down" + (" (with leftovers, above)" if left else ""), file=sys.stderr)
    return 1 if left else 0


def add_node_commands(commands: Any) -> None:
    node = commands.add_parser("node", help="a real node (kubelet, containerd) for a lab cluster, on this machine")
    verbs = node.add_subparsers(dest="verb", required=True)
    up = verbs.add_parser("up", help="join a real node to a lab cluster and wait until it is Ready")
    up.add_argument("name", help="the node's name (lower-case letters, digits, '-')")
    up.add_argument("--lab", help="the cluster `gpulab up LAB` started")
    up.add_argument("--kubeconfig", metavar="FILE", help="the cluster's kubeconfig (instead of --lab)")
    up.add_argument("--image", action="append", metavar="IMAGE", help="a podman image to load into the node")
    up.add_argument("--seccomp-profile", action="append", metavar="NAME=FILE",
                    help="a Localhost seccomp profile for the node's Pods (their localhostProfile NAME)")  # fmt: skip
    up.add_argument("--no-restrict-oom-score-adj", action="store_true",
                    help="let containerd lower the sandbox's OOM score (needs CAP_SYS_RESOURCE)")  # fmt: skip
    up.add_argument("--fail-cgroup-v1", choices=("auto", "true", "false"), default="auto",
                    help="the kubelet's failCgroupV1 (auto: false where the machine has cgroups v1)")  # fmt: skip
    up.set_defaults(run=cmd_node_up)
    down = verbs.add_parser("down", help="remove a node `gpulab node up` made, and all it made")
    down.add_argument("name")
    down.set_defaults(run=cmd_node_down)


NODE_ERRORS = (NodeError, ImageError)
