"""kwokctl's command lines for a lab cluster of the binary runtime, and what it leaves to read."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

KWOKCTL_BINARIES = {
    "--etcd-binary": "etcd",
    "--kube-apiserver-binary": "kube-apiserver",
    "--kube-controller-manager-binary": "kube-controller-manager",
    "--kube-scheduler-binary": "kube-scheduler",
    "--kwok-controller-binary": "kwok",
}


def create_command(bin_dir: Path, name: str, timeout: float, config: Path) -> list[str]:
    """Our binaries, no QPS limits, and no ~/.kube/config touched (an empty --kubeconfig); the ports are in the config."""
    command = [str(bin_dir / "kwokctl"), "create", "cluster", "--name", name, "--runtime", "binary"]
    command += ["--kubeconfig", "", "--disable-qps-limits", "--timeout", f"{int(timeout)}s", "--config", str(config)]
    for flag, binary in KWOKCTL_BINARIES.items():
        command += [flag, str(bin_dir / binary)]
    return command


def run_kwokctl(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """The command's result with its output, or None when it did not finish within ``timeout``. Then, or when
    interrupted, it is killed with its process group: the tools it runs (etcdctl, which waits forever on an etcd
    it cannot talk to), not the components it starts (each has a session of its own)."""
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException as error:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        if isinstance(error, subprocess.TimeoutExpired):
            return None
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def delete_command(bin_dir: Path, name: str, unused_kubeconfig: Path) -> list[str]:
    """kwokctl refuses an empty --kubeconfig here; a path of our own keeps ~/.kube/config untouched."""
    return [str(bin_dir / "kwokctl"), "delete", "cluster", "--name", name, "--kubeconfig", str(unused_kubeconfig)]


def component_logs(cluster_dir: Path) -> str:
    """The tail of each component's log, for a start that failed."""
    logs_dir = cluster_dir / "logs"
    if not logs_dir.is_dir():
        return ""
    return "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}" for log in sorted(logs_dir.glob("*.log"))
    )


def port_is_free(port: int) -> bool:
    """Whether a server can listen on the port, as the components do (Go sets SO_REUSEADDR): one that only the
    TIME_WAIT of a closed connection holds is free (a cluster just stopped leaves some for a minute)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def snapshot_command(bin_dir: Path, name: str, verb: str, path: Path) -> list[str]:
    """``kwokctl snapshot save|restore`` in the etcd format (it keeps status and every resource)."""
    return [str(bin_dir / "kwokctl"), "snapshot", verb, "--name", name, "--format", "etcd", "--path", str(path)]
