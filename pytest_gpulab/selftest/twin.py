"""Every self-test row graded twice: live, as a learner runs ``pytest --lab``, and from its bundle, as an
instructor's ``gpulab grade`` does; the two must give each step the same outcome.

A bundle is unpacked elsewhere and graded on a cluster restored from its snapshot, so a grader that
reads a path the learner wrote (an imports glob under the lab root) or an object only the live cluster
has grades the two apart; this is where that shows. Both gradings use the row's one seed. Rows that
share a cluster share its snapshot, saved once, and the cluster restored from it, started once for all
their bundles (grading only reads it; each bundle is still unpacked and graded on its own). Usable
without pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ..cluster import snapshot
from ..cluster.kwok import KwokCluster, KwokClusterError
from ..cohort.bundle import pack, root_files, sha256_file
from ..cohort.regrade import GRADED, grade_bundle
from ..cohort.warm import Gradings
from ..labs.discovery import Lab
from .state import RowError, read_report

BUNDLE = "row.gpulab.tar.gz"
TWIN_PROBLEMS = "from_bundle_differs"  # the live report's key for the steps its bundle graded otherwise


class Twins:
    """Where a lab's rows are bundled and graded again; a cluster's snapshot is saved once, for every row on it."""

    def __init__(self, lab: Lab, work: Path, gradings: Gradings) -> None:
        self.lab, self.work, self.gradings = lab, work, gradings
        self._snapshots: dict[str, Path] = {}
        self._restored: dict[str, KwokCluster] = {}  # by the snapshot's digest
        self._restoring: dict[str, threading.Lock] = {}
        self._stack = ExitStack()
        self._lock = threading.Lock()

    def _snapshot(self, cluster: KwokCluster) -> Path:
        with self._lock:
            if cluster.name not in self._snapshots:
                path = self.work / f"snapshot-{cluster.name}.db"
                snapshot.save(cluster, path)
                self._snapshots[cluster.name] = path
            return self._snapshots[cluster.name]

    def grade(
        self, folder: Path, root: Path, cluster: KwokCluster, seed: int, args: Sequence[str], *, lent: bool = False
    ) -> dict[str, Any]:
        """The row's bundle (its root as a learner's would be, recorded where it stood) graded as `gpulab grade`
        grades one; its grading report. With ``lent``, on the cluster restored once for every row on ``cluster``
        (stopped by :meth:`close`); else on one of its own."""
        bundle = folder / BUNDLE
        pack(self.lab, root_files(root), self._snapshot(cluster), bundle, learner=folder.name, root=str(root))
        out = folder / "from-bundle"
        outcome = grade_bundle(
            bundle, out, seed=seed, lab_dirs=[self.lab.folder], gradings=self.gradings, extra_args=args,
            restore=self._restore if lent else snapshot.grading_cluster,
        )  # fmt: skip
        if outcome.status != GRADED:
            raise RowError(f"its bundle was not graded ({outcome.status}): {outcome.reason}")
        return read_report(out / "report.json", 0, out / "output.txt")

    @contextmanager
    def _restore(self, path: Path) -> Iterator[KwokCluster]:
        """The cluster restored from a snapshot with these bytes: started by the first bundle, lent to the rest."""
        digest = sha256_file(path)
        with self._lock:
            starting = self._restoring.setdefault(digest, threading.Lock())
        with starting:
            with self._lock:
                lent = self._restored.get(digest)
            if lent is None:
                made = ExitStack()
                lent = made.enter_context(snapshot.grading_cluster(path))
                with self._lock:
                    self._stack.callback(made.close)
                    self._restored[digest] = lent
        try:
            yield lent
        except KwokClusterError:  # it may be the cluster's fault: the next bundle (the retry) gets a new one
            with self._lock:
                if self._restored.get(digest) is lent:
                    del self._restored[digest]
            raise

    def close(self) -> None:
        """Stop every cluster lent so far."""
        with self._lock:
            stack, self._stack = self._stack, ExitStack()
            self._restored.clear()
        stack.close()


def disagreements(live: dict[str, Any], bundled: dict[str, Any]) -> list[str]:
    """Each step whose outcome from the bundle is not its live one, with what the bundle's grading said."""
    outcomes = {step["number"]: step for step in bundled.get("steps", [])}
    found = []
    for step in live.get("steps", []):
        twin = outcomes.get(step["number"], {})
        if twin.get("outcome") != step["outcome"]:
            said = next((c.get("message") for c in twin.get("checks", []) if c.get("outcome") != step["outcome"]), "")
            found.append(
                f"step {step['number']} is {step['outcome']} graded live but {twin.get('outcome', 'missing')} "
                f"graded from its bundle" + (f": {said}" if said else "")
            )
    return found
