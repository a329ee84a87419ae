"""kwokctl's command lines for a lab cluster of the binary runtime, and what it leaves to read."""

from __future__ import annotations

import socket
from pathlib import Path

KWOKCTL_BINARIES = {
    "--etcd-binary": "etcd",
    "--kube-apiserver-binary": "kube-apiserver",
    "--kube-controller-manager-binary": "kube-controller-manager",
    "--kube-scheduler-binary": "kube-scheduler",
    "--kwok-controller-binary": "kwok",
}


def create_command(bin_dir: Path, name: str, timeout: float, config: Path, port: int | None) -> list[str]:
    """Our binaries, no QPS limits, and no ~/.kube/config touched (an empty --kubeconfig)."""
    command = [str(bin_dir / "kwokctl"), "create", "cluster", "--name", name, "--runtime", "binary"]
    command += ["--kubeconfig", "", "--disable-qps-limits", "--timeout", f"{int(timeout)}s", "--config", str(config)]
    for flag, binary in KWOKCTL_BINARIES.items():
        command += [flag, str(bin_dir / binary)]
    return command + (["--kube-apiserver-port", str(port)] if port else [])


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
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def snapshot_command(bin_dir: Path, name: str, verb: str, path: Path) -> list[str]:
    """``kwokctl snapshot save|restore`` in the etcd format (it keeps status and every resource)."""
    return [str(bin_dir / "kwokctl"), "snapshot", verb, "--name", name, "--format", "etcd", "--path", str(path)]
