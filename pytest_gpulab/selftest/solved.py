"""The reference solved once for each set of its steps that rows start from, then restored for every other row.

A row that changes the cluster (a shell snippet, or only some of the reference's steps) is graded on a cluster of
its own. Solving the reference on each such cluster costs some 11 CPU-seconds a row; restoring a solved state into a
fresh cluster costs about 2 (``bench/README.md``). So the first row of a set of steps (the reference itself, for
all of them) solves on its cluster and keeps that state: its lab root, copied, and its cluster's etcd snapshot,
saved before anything else is done to it, without its node leases (:mod:`..cluster.handover`). Each later row of
that set starts a new cluster of its own on the snapshot, every component running as on a solved cluster (the
frozen gradings of bundles run none), once its controller manager has caught up, and gets a copy of the root. A
state that could not be kept is solved again, row by row. Usable without pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..cluster import handover, snapshot
from ..cluster.kwok import KwokCluster, KwokClusterError
from ..labs.waiting import wait_until
from .clusters import MachineError, started
from .variants import copy_root

Steps = tuple[int, ...] | None  # None: every step of the reference
CATCH_UP_TIMEOUT = 60.0


@dataclass
class _State:
    """One solved state: kept by its first row, waited for by the others."""

    ready: threading.Event = field(default_factory=threading.Event)
    root: Path | None = None
    snapshot: Path | None = None


class SolvedStates:
    """The solved states of one lab's proof, by the steps solved; their files live under ``work``."""

    def __init__(self, work: Path, name: Callable[[], str]) -> None:
        self.work, self._name = work, name
        self._states: dict[Steps, _State] = {}
        self._lock = threading.Lock()
        self.restored = 0  # rows that started from a kept state

    def claim(self, steps: Steps) -> bool:
        """Whether the caller is the first for ``steps``, and so solves and keeps it (or gives it up)."""
        with self._lock:
            if steps in self._states:
                return False
            self._states[steps] = _State()
            return True

    def keep(self, steps: Steps, cluster: KwokCluster, root: Path) -> None:
        """The solved state of ``cluster`` and ``root`` kept for the later rows of ``steps``; one that cannot be
        saved is not kept, and those rows solve for themselves."""
        label = "all" if steps is None else "-".join(map(str, steps))
        path = self.work / f"solved-{label}.db"
        try:
            snapshot.save(cluster, path)
            handover.without_node_leases(path, cluster.bin_dir)  # else the restored kwok leaves its nodes alone
            kept = copy_root(root, self.work / f"solved-{label}")
        except (KwokClusterError, OSError):
            return
        self._states[steps].root, self._states[steps].snapshot = kept, path

    def release(self, steps: Steps) -> None:
        """The first row of ``steps`` is done with it, kept or not: the later rows go on."""
        self._states[steps].ready.set()

    def restored_cluster(self, steps: Steps, root: Path, what: str) -> KwokCluster | None:
        """A new started cluster on the kept state of ``steps``, and its root copied to ``root``; None when no
        state was kept (the caller solves). Waits for the first row to keep it."""
        with self._lock:
            state = self._states.get(steps)
        if state is None:
            return None
        state.ready.wait()
        if state.snapshot is None or state.root is None:
            return None
        copy_root(state.root, root)
        path = state.snapshot
        cluster = started(lambda: KwokCluster(self._name(), seed=lambda made: snapshot.restore_data(made, path)), what)
        if not wait_until(lambda: _controllers_caught_up(cluster), CATCH_UP_TIMEOUT, interval=0.05):
            cluster.stop()
            raise MachineError(
                f"the restored cluster's controller manager did not start within {CATCH_UP_TIMEOUT:.0f}s"
            )
        with self._lock:
            self.restored += 1
        return cluster


def _controllers_caught_up(cluster: KwokCluster) -> bool:
    """Whether the controller manager has read the restored state: it has published this cluster's own CA (a new
    one: the snapshot's is the solving cluster's) to ``default``, which it does once its informers, shared by every
    controller, are synced. A row's shell acts at once; a DaemonSet changed twice before the controllers look
    would keep one revision, not two."""
    found = cluster.api.get("/api/v1/namespaces/default/configmaps/kube-root-ca.crt") or {}
    published = (found.get("data") or {}).get("ca.crt", "")
    return bool(published) and published.strip() == (cluster.cluster_dir / "pki" / "ca.crt").read_text().strip()


def solved_cluster(
    states: SolvedStates,
    steps: Steps,
    root: Path,
    start: Callable[[], KwokCluster],
    solve: Callable[[KwokCluster, Path, Steps], None],
    what: str,
) -> KwokCluster:
    """A started cluster of the caller's own with the reference's ``steps`` solved on it, and the lab root in
    ``root``: restored from the kept state, or solved (and kept, by the first row of ``steps``)."""
    first = states.claim(steps)
    if not first and (cluster := states.restored_cluster(steps, root, what)) is not None:
        return cluster
    try:
        cluster = start()
        try:
            solve(cluster, root, steps)
        except BaseException:
            cluster.stop()
            raise
        if first:
            states.keep(steps, cluster, root)
        return cluster
    finally:
        if first:
            states.release(steps)
