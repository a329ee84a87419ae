"""A real node's life on this machine.

Up: the node's folder (``configs.py``), its images as archives (``images.py``), then containerd and the kubelet
started in namespaces of their own (``unshare``: a mount namespace, private, where ``/run`` and ``/var/log`` are
tmpfs of the node's, and a PID namespace whose first process is a shell), inside cgroups named for the node;
up once the Node is Ready. The command that brought it up may exit: the node runs on (``gpulab node up``).

Down: the PID namespace's first process is killed, which kills every process of the node (kubelet,
containerd, shims, containers) at once, and the mount namespace goes with them, taking every mount of the
node (snapshots, volumes, network namespaces). What the namespaces cannot take is then removed: the Node
object, the cgroups, the CNI bridge and the folder. :func:`leftovers` lists whatever is still there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ..cluster.environ import environ_now
from ..cluster.reaper import start_time
from . import images
from .configs import INSIDE, NodeOptions, NodePaths, cni_config, containerd_config, kubelet_config
from .leftovers import bridge_exists, cgroup_mounts, leftovers, remove_cgroups

NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?")
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins (podman's too)

INNER = r"""set -eu
NAME=$2 W=@INSIDE@
cd "$1"  # the node's folder, held while /run and /var/log are covered
mount -t tmpfs -o mode=0755,size=64m gpulab-node /run
mount -t tmpfs -o mode=0755,size=64m gpulab-node /var/log
mkdir "$W"
mount --bind . "$W"
cd "$W"
containerd --config "$W/containerd/config.toml" >"$W/logs/containerd.log" 2>&1 &
n=0
until [ -S "$W/containerd.sock" ]; do
  n=$((n + 1))
  [ "$n" -le 300 ] || { echo "containerd did not open its socket within 30 s" >&2; exit 1; }
  sleep 0.1
done
for archive in "$W"/images/*.tar; do
  ctr --address "$W/containerd.sock" --namespace k8s.io images import "$archive" >>"$W/logs/images.log" 2>&1
  rm -f "$archive"
done
kubelet --config="$W/kubelet/config.yaml" --kubeconfig="$W/kubeconfig" --root-dir="$W/kubelet/root" \
  --hostname-override="$NAME" >"$W/logs/kubelet.log" 2>&1 &
wait
""".replace("@INSIDE@", str(INSIDE))
OUTER = 'for procs in $GPULAB_NODE_CGROUPS; do echo $$ >"$procs"; done; exec "$@"'


class NodeError(RuntimeError):
    """The node could not be brought up, or down."""


def _cgroup_name(name: str) -> str:
    return f"gpulab-node-{name}"


def _bridge_name(name: str) -> str:
    return "gpl" + hashlib.sha256(name.encode()).hexdigest()[:12]


class RealNode:
    """One real node of ``kubeconfig``'s cluster, named ``name``, kept in ``folder``."""

    def __init__(self, name: str, kubeconfig: Path, folder: Path, bin_dir: Path, kubectl: Path) -> None:
        if not NAME.fullmatch(name):
            raise NodeError(f"{name!r} is not a node name: lower-case letters, digits and '-', at most 42")
        self.name, self.kubeconfig, self.paths = name, kubeconfig, NodePaths(folder)
        self.bin_dir, self.kubectl_binary = bin_dir, kubectl

    @classmethod
    def of_folder(cls, name: str, folder: Path, bin_dir: Path, kubectl: Path) -> RealNode:
        """The node ``up`` left in ``folder``, with the kubeconfig it was joined with."""
        kubeconfig = Path(cls._state(NodePaths(folder)).get("kubeconfig") or "/nonexistent")
        return cls(name, kubeconfig, folder, bin_dir, kubectl)

    @staticmethod
    def _state(paths: NodePaths) -> dict[str, Any]:
        try:
            return dict(json.loads(paths.state.read_text()))
        except (OSError, ValueError):
            return {}

    # --- up -------------------------------------------------------------------------------------------------
    def up(
        self, options: NodeOptions, say: Callable[[str], None] = lambda _: None, *, outlives_caller: bool = False
    ) -> RealNode:
        """Bring the node up and wait until it is Ready. Unless ``outlives_caller`` (``gpulab node up``), a
        watchdog takes it down when this process ends, however it ends."""
        if self.paths.state.exists():
            raise NodeError(f"node {self.name} is already up from {self.paths.root} (`gpulab node down` first)")
        if missing := _missing(options):
            raise NodeError(f"node {self.name} cannot start here: {'; '.join(missing)}")
        try:
            bridge = _bridge_name(self.name)
            self._write_configs(options, bridge)
            say("saving the node's images")
            images.pause_archive(self.bin_dir / "pause", self.paths.images)
            for image in options.images:
                images.podman_archive(image, self.paths.images)
            process = self._start(bridge)
            if not outlives_caller:
                self._watch()
            say(f"containerd and the kubelet started (pid {process.pid}); waiting for node {self.name} to be Ready")
            self._wait_ready(process, options.ready_timeout)
        except BaseException:  # whatever stopped it, a node half up is taken down: nothing outlives a failed up
            self.down()
            raise
        return self

    def _write_configs(self, options: NodeOptions, bridge: str) -> None:
        paths, inside = self.paths, NodePaths(INSIDE)
        for folder in ("containerd_root", "containerd_state", "cni_conf", "cni_ipam", "kubelet_root", "pod_logs",
                       "volume_plugins", "images", "logs"):  # fmt: skip
            getattr(paths, folder).mkdir(parents=True, exist_ok=True)
        paths.root.chmod(0o711)  # walked through by the Pods' roots (INSIDE), listed by none
        paths.containerd_config.parent.mkdir(parents=True, exist_ok=True)
        paths.containerd_config.write_text(containerd_config(inside, options, self.bin_dir, CNI_BIN))
        (paths.cni_conf / "10-gpulab.conflist").write_text(json.dumps(cni_config(inside, options, bridge), indent=1))
        config = kubelet_config(inside, options, f"/{_cgroup_name(self.name)}")
        paths.kubelet_config.write_text(yaml.safe_dump(config, sort_keys=False))
        for profile, source in options.seccomp_profiles.items():
            target = paths.kubelet_root / "seccomp" / profile
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        paths.inner.write_text(INNER)
        # The cluster's kubeconfig with its certificates in it: the kubelet reads it inside the node's mounts.
        flat = self.kubectl("config", "view", "--raw", "--flatten")
        if flat.returncode != 0:
            raise NodeError(f"the cluster's kubeconfig {self.kubeconfig} cannot be read: {flat.stderr.strip()}")
        paths.kubeconfig.touch(mode=0o600)
        paths.kubeconfig.write_text(flat.stdout)

    def _start(self, bridge: str) -> subprocess.Popen[bytes]:
        cgroups = []
        for mount in cgroup_mounts():
            group = mount / _cgroup_name(self.name)
            group.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):  # a v1 cpuset group takes no process until they are set
                if (mount / knob).exists() and not (group / knob).read_text().strip():
                    (group / knob).write_text((mount / knob).read_text())
            cgroups.append(str(group / "cgroup.procs"))
        environment = environ_now()
        environment.update(PATH=f"{self.bin_dir}:{environment.get('PATH', '/usr/bin:/bin')}",
                           GPULAB_NODE_CGROUPS=" ".join(cgroups))  # fmt: skip
        unshare = ["unshare", "--mount", "--propagation=private", "--pid", "--fork", "--kill-child", "--mount-proc"]
        command = ["sh", "-c", OUTER, "gpulab-node", *unshare, "sh", str(self.paths.inner), str(self.paths.root),
                   self.name]  # fmt: skip
        with open(self.paths.logs / "node.log", "ab") as log:
            process = subprocess.Popen(command, env=environment, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       start_new_session=True)  # fmt: skip
        state = {"name": self.name, "pid": process.pid, "start": start_time(process.pid), "bridge": bridge,
                 "kubeconfig": str(self.kubeconfig)}  # fmt: skip
        self.paths.state.write_text(json.dumps(state))
        return process

    def _watch(self) -> None:
        owner = os.getpid()
        command = [sys.executable, "-m", "pytest_gpulab.node.watchdog", str(self.paths.root), self.name,
                   str(self.bin_dir), str(self.kubectl_binary), str(owner), start_time(owner)]  # fmt: skip
        with open(self.paths.logs / "watchdog.log", "ab") as log:
            watchdog = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True)  # fmt: skip
        state = {**self._state(self.paths), "watchdog": watchdog.pid, "watchdog_start": start_time(watchdog.pid)}
        self.paths.state.write_text(json.dumps(state))

    def kubectl(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.kubectl_binary), f"--kubeconfig={self.kubeconfig}", *args],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """containerd's ``ctr`` in the node's namespaces (its FIFOs and sockets are in the node's own ``/run``),
        in the Pods' containerd namespace (``k8s.io``)."""
        namespace = _children(int(self._state(self.paths).get("pid") or 0))
        if not namespace:
            raise NodeError(f"node {self.name} is not running")
        command = ["nsenter", f"--target={namespace[0]}", "--mount", "--pid", "--", str(self.bin_dir / "ctr"),
                   f"--address={NodePaths(INSIDE).socket}", "--namespace=k8s.io", *args]  # fmt: skip
        return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)

    def ready(self) -> bool:
        got = self.kubectl("get", "node", self.name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}")
        return got.returncode == 0 and got.stdout.strip() == "True"

    def _wait_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if process.poll() is not None:
                raise NodeError(f"node {self.name} stopped before it was Ready (exit {process.returncode})"
                                + self.log_tails())  # fmt: skip
            if time.monotonic() > deadline:
                raise NodeError(f"node {self.name} was not Ready within {timeout:.0f}s" + self.log_tails())
            time.sleep(0.5)  # polled: the node's status is written every few seconds by the kubelet

    def log_tails(self, lines: int = 15) -> str:
        tails = []
        for log in sorted(self.paths.logs.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"\n--- {log.name} (last {len(text)} lines)\n" + "\n".join(text))
        return "".join(tails)

    # --- down -----------------------------------------------------------------------------------------------
    def down(self, timeout: float = 30) -> list[str]:
        """Remove the node; return what could not be removed (empty when nothing is left)."""
        state = self._state(self.paths)
        watchdog = int(state.get("watchdog") or 0)
        if watchdog and watchdog != os.getpid() and start_time(watchdog) == state.get("watchdog_start"):
            _kill_tree(watchdog, timeout)  # taken down now: its watchdog has nothing left to do
        with contextlib.suppress(OSError, subprocess.SubprocessError):  # a cluster gone took its Node with it
            self.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false")
        if (pid := state.get("pid")) and start_time(int(pid)) == state.get("start"):  # not a pid used again
            _kill_tree(int(pid), timeout)
        remove_cgroups(_cgroup_name(self.name), timeout)
        bridge = state.get("bridge") or _bridge_name(self.name)
        if bridge_exists(bridge):
            subprocess.run(["ip", "link", "delete", bridge], capture_output=True, timeout=30)
        shutil.rmtree(self.paths.root, ignore_errors=True)
        return leftovers(_cgroup_name(self.name), bridge, self.paths.root)


def _missing(options: NodeOptions) -> list[str]:
    """What this machine lacks for a node, each in words that say how to get it."""
    missing = [] if os.geteuid() == 0 else ["a node needs root (mounts, cgroups, a network device)"]
    for tool, package in (("unshare", "util-linux"), ("nsenter", "util-linux"), ("ip", "iproute2")):
        if shutil.which(tool) is None:
            missing.append(f"{tool} is not installed (Debian's {package})")
    if not (CNI_BIN / "bridge").is_file():
        missing.append(f"no CNI bridge plugin in {CNI_BIN} (Debian's containernetworking-plugins)")
    if options.images and shutil.which("podman") is None:
        missing.append("the images to load are podman's, and podman is not installed")
    return missing


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _kill_tree(pid: int, timeout: float) -> None:
    """Kill a process and its children, and wait until they have ended. For the node: unshare and its child, the
    PID namespace's first process, whose end ends every process of the namespace."""
    targets = [*_children(pid), pid]
    for target in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{target}").exists() and not _zombie(target) for target in targets):
        if time.monotonic() > deadline:
            raise NodeError(f"the node's processes ({targets}) did not end within {timeout:.0f}s")
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
