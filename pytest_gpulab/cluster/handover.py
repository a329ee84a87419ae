"""A snapshot made ready for a cluster whose kwok takes over its nodes at once: without the node leases.

kwok manages a fake node, and the Pods on it, only while it holds the node's Lease in ``kube-node-lease``. A
snapshot keeps each Lease as the kwok that saved it held it (its holder, its renew time, 200 s), so the kwok of a
cluster started on it leaves the nodes alone until those leases expire: a Pod created there stays Pending, and
the node controller marks the nodes NotReady. The frozen gradings of bundles run no kwok and need no such care.
So the snapshot is restored into a data directory of its own, an etcd alone (Unix sockets in that directory, no
port) deletes the leases, and the snapshot is saved again; kwok makes new leases as it starts. Usable without
pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..labs.waiting import wait_until
from . import reaper
from .kwok import KwokClusterError

NODE_LEASES = "/registry/leases/kube-node-lease/"
TIMEOUT = 60.0
CLIENT, PEER = "client:1", "peer:2"  # etcd names a Unix socket host:port, made in its working directory


def without_node_leases(path: Path, bin_dir: Path) -> None:
    """``path``'s snapshot rewritten without the node leases; raises :class:`KwokClusterError` saying which step
    failed. The etcd it starts ends with the call, or with this process when it is killed (a watchdog of
    :mod:`.reaper` holds the folder, as for a cluster)."""
    folder = Path(tempfile.mkdtemp(prefix=reaper.WORKDIR_PREFIX))
    watchdog = reaper.Watchdog(folder, folder, remove_workdir=True)
    try:
        _run([str(bin_dir / "etcdutl"), "snapshot", "restore", str(path), "--data-dir", "data"], folder, "restore")
        etcd = subprocess.Popen(
            [str(bin_dir / "etcd"), "--data-dir", str(folder / "data"), "--log-level", "error", "--listen-client-urls",
             f"unix://{CLIENT}", "--advertise-client-urls", f"unix://{CLIENT}", "--listen-peer-urls", f"unix://{PEER}"],
            cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            if not wait_until(lambda: (folder / CLIENT).exists() or etcd.poll() is not None, TIMEOUT, interval=0.02):
                raise KwokClusterError(f"etcd did not serve the snapshot within {TIMEOUT:.0f}s")
            client = [str(bin_dir / "etcdctl"), "--endpoints", f"unix://{CLIENT}", f"--command-timeout={TIMEOUT:.0f}s"]
            _run([*client, "del", "--prefix", NODE_LEASES], folder, "delete the node leases")
            _run([*client, "snapshot", "save", "again.db"], folder, "save the snapshot again")
        finally:
            etcd.kill()
            etcd.wait()
        os.replace(folder / "again.db", path)
    finally:
        watchdog.end()
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(
            command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise KwokClusterError(f"etcd could not {what} within {TIMEOUT:.0f}s") from None
    if done.returncode != 0:
        raise KwokClusterError(f"etcd could not {what}: {(done.stdout + done.stderr).strip()[-1000:]}")
