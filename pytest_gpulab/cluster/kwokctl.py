"""kwokctl for a lab cluster of the binary runtime: its command lines, the checks before a start, the words for a
failed one, the delete, and what it leaves to read."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from . import toolchain


class KwokClusterError(RuntimeError):
    """The lab cluster could not be started, reached or stopped; says what to do."""


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


def check_can_start(bin_dir: Path, apiserver_port: int | None) -> None:
    """The binaries are there, and the API server's port, if chosen, is free."""
    missing = toolchain.missing_binaries(bin_dir)
    if missing:
        raise KwokClusterError(
            f"missing lab cluster binaries in {bin_dir}: {', '.join(missing)}. "
            "Build them with `gpulab build` (or scripts/setup)."
        )
    if apiserver_port and not port_is_free(apiserver_port):
        raise KwokClusterError(
            f"port {apiserver_port} is already in use, so the lab cluster's API server cannot listen "
            "on it. Stop what uses it (another lab cluster: `gpulab down LAB`) or choose another port."
        )


def explain_start_failure(cluster_dir: Path | None, apiserver_port: int | None, what: str, output: str = "") -> str:
    """A start failure in words: the likely cause first, then kwokctl's output and the logs' tails."""
    logs = component_logs(cluster_dir) if cluster_dir else ""
    if "address already in use" in output + logs:
        port = f" ({apiserver_port})" if apiserver_port else ""
        return (
            f"the lab cluster could not start: a port it needs{port} is already in use. "
            "Stop the other lab cluster (`gpulab down LAB`) or choose another port."
        )
    return f"the lab cluster could not start: {what}.\n{output}\n{logs}".rstrip()


def delete_cluster(bin_dir: Path, name: str, workdir: Path, env: dict[str, str], *, check: bool) -> None:
    """``kwokctl delete cluster``; with ``check``, a failure raises."""
    cluster_dir = workdir / "clusters" / name
    if "kwokctl" in toolchain.missing_binaries(bin_dir):
        raise KwokClusterError(
            f"kwokctl is not in {bin_dir}, so the cluster in {cluster_dir} cannot be stopped. "
            "Build the binaries with `gpulab build` (or set GPULAB_BIN_DIR), then try again."
        )
    result = run_kwokctl(delete_command(bin_dir, name, workdir / "unused-kubeconfig.yaml"), env, 120)
    if check and result is None:
        raise KwokClusterError(f"kwokctl did not delete the cluster {name} within 120s; see {cluster_dir}")
    if check and result is not None and result.returncode != 0:
        raise KwokClusterError(
            f"kwokctl could not delete the cluster {name} (its processes may still run; "
            f"see {cluster_dir}):\n{(result.stdout + result.stderr)[-2000:]}"
        )
