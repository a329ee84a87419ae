"""``gpulab selftest LAB``: prove a lab on fresh lab clusters, N gradings at a time.

- the reference solution passes every step, and grading it changes neither a
  learner file nor a cluster object;
- the untouched start (a fresh cluster, an empty lab root) fails or blocks every
  step, each with a sentence and no traceback;
- every form of ``variants.toml`` passes every step; every trap fails exactly
  its step, with its words (:mod:`pytest_gpulab.selftest.judge`).

Each row is graded by the real plugin, ``pytest --lab`` in a subprocess with
``--gpulab-report`` (and ``--lab-dir`` the lab's own folder), as ``gpulab grade``
does, and judged from that report. Variants that only edit files share the
reference's cluster (grading only reads it); a variant that changes the cluster
gets a cluster of its own. Usable without pytest: :func:`run_selftest`.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from ..cluster.kwok import KwokCluster
from ..cohort.warm import COLD, Gradings, WarmGradings
from ..labs.discovery import Lab
from .clusters import MachineError, started
from .judge import REFERENCE, START, Row, judge
from .solved import SolvedStates, Steps, solved_cluster
from .state import ReferenceState, RowError, bounded, read_report, seed_of, tail
from .twin import TWIN_PROBLEMS, Twins
from .twin import disagreements as twin_disagreements
from .variants import VARIANTS_FILE, Variant, VariantsError, copy_root, load_variants

GRADING_TIMEOUT = 900.0


class Selftest:
    """One lab's proof: where its rows are graded, and how."""

    def __init__(self, lab: Lab, work: Path, gradings: Gradings = COLD, *, bundles: bool = True) -> None:
        self.lab, self.work, self.gradings = lab, work, gradings
        self.twins = Twins(lab, work, gradings) if bundles else None  # each row graded from its bundle too
        self.states = SolvedStates(work, self._next_name)
        self._clusters = 0
        self._lock = threading.Lock()

    def _next_name(self) -> str:
        with self._lock:
            self._clusters += 1
            return f"selftest-{self._clusters}"

    def cluster(self) -> KwokCluster:
        return KwokCluster.for_lab(self.lab, name=self._next_name())

    def started(self, row: str) -> KwokCluster:
        """A new cluster, started (once more if the first start fails: :mod:`.clusters`); the caller stops it."""
        return started(self.cluster, f"{self.lab.name}-{row}")

    @contextmanager
    def running(self, row: str, root: Path | None = None, steps: Steps = None) -> Iterator[KwokCluster]:
        """A cluster of the row's own, stopped at the end; with ``root``, the reference's ``steps`` solved on it
        and in ``root`` (:mod:`.solved`: restored when another row solved them first)."""
        if root is None:
            cluster = self.started(row)
        else:
            start = partial(self.started, row)
            cluster = solved_cluster(self.states, steps, root, start, self.solve, f"{self.lab.name}-{row}")
        try:
            yield cluster
        finally:
            cluster.stop()

    def row_dir(self, name: str) -> Path:
        folder = self.work / name
        (folder / "run").mkdir(parents=True)
        return folder

    def solve(self, cluster: KwokCluster, root: Path, steps: Steps = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        command = ["bash", str(self.lab.reference), str(root), *map(str, steps or ())]
        done = bounded("the reference solution", command, env=cluster.environment(), capture_output=True, text=True)
        if done.returncode != 0:
            raise RowError(f"the reference solution failed (exit {done.returncode}): {tail(done.stderr)}")

    def run_shell(self, cluster: KwokCluster, root: Path, snippet: str) -> None:
        environment = {**cluster.environment(), "ROOT": str(root), "LAB_DIR": str(self.lab.folder)}
        environment["SOLVE"] = str(self.lab.reference)
        command = ["bash", "-c", "set -euo pipefail\n" + snippet]
        done = bounded("the shell snippet", command, cwd=root, env=environment, capture_output=True, text=True)
        if done.returncode != 0:
            raise RowError(f"the shell snippet failed (exit {done.returncode}): {tail(done.stderr + done.stdout)}")

    def grade(
        self, folder: Path, root: Path, cluster: KwokCluster, args: Sequence[str] = (), *, shared: bool = False
    ) -> dict[str, Any]:
        """``pytest --lab`` on ``root`` against ``cluster``; its grading report. Then, with ``bundles``, the row's
        bundle graded as an instructor's `gpulab grade` would, with the same seed: each step whose outcome
        differs is a problem of the row's (the report's ``TWIN_PROBLEMS``). A ``shared`` cluster's bundles are
        graded on one cluster restored from its snapshot (:mod:`.twin`)."""
        given, rest = seed_of(args)
        seed = given if given is not None else secrets.randbelow(10**9)
        report = self.grade_live(folder, root, cluster, [*rest, f"--lab-seed={seed}"])
        if self.twins is not None:
            bundled = self.twins.grade(folder, root, cluster, seed, rest, lent=shared)
            report[TWIN_PROBLEMS] = twin_disagreements(report, bundled)
        return report

    def grade_live(self, folder: Path, root: Path, cluster: KwokCluster, args: Sequence[str]) -> dict[str, Any]:
        report = folder / "report.json"
        command = [
            f"--lab={self.lab.name}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
            f"--gpulab-report={report}", "-p", "no:cacheprovider", "--color=no", f"--lab-dir={self.lab.folder}", *args,
        ]  # fmt: skip
        try:
            returncode = self.gradings.run(
                command, cwd=folder / "run", env=cluster.environment(), output=folder / "output.txt",
                timeout=GRADING_TIMEOUT,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise RowError(f"the grading did not finish within {GRADING_TIMEOUT:.0f}s") from None
        return read_report(report, returncode, folder / "output.txt")

    def prove_start(self) -> Row:
        def body() -> dict[str, Any]:
            folder = self.row_dir("start")
            (folder / "root").mkdir()
            with self.running("start") as cluster:
                return self.grade(folder, folder / "root", cluster)

        return attempt(Row(START), body, self.lab.name)

    def prove_alone(self, variant: Variant) -> Row:
        """A variant that changes the cluster: the reference's steps on a cluster of its own, its edits, its shell."""

        def body() -> dict[str, Any]:
            folder = self.row_dir(f"{variant.kind}-{variant.name}")
            root = folder / "root"
            with self.running(variant.name, root, variant.solve_steps) as cluster:
                variant.apply_edits(root)
                if variant.shell is not None:
                    self.run_shell(cluster, root, variant.shell)
                return self.grade(folder, root, cluster, variant.grader_args)

        return attempt(Row(variant.kind, variant), body, self.lab.name)


class SharedReference:
    """The reference's cluster and lab root, graded first, then lent to every variant that only edits files."""

    def __init__(self, test: Selftest, users: int) -> None:
        self.test, self.users = test, users + 1  # the reference's own row is a user too
        self.ready = threading.Event()
        self.cluster: KwokCluster | None = None
        self.failure: str | None = None  # why it cannot be lent
        self.machine = False  # the machine's fault: its cluster did not start
        self.folder = test.row_dir("reference")
        self._lock = threading.Lock()
        test.states.claim(None)  # the reference solves every step on its cluster, and keeps them for later rows

    def prove(self) -> Row:
        row = Row(REFERENCE)
        try:
            return attempt(row, lambda: self._set_up_and_grade(row), self.test.lab.name)
        finally:
            if self.cluster is None and self.failure is None:
                self.failure = row.error or "the reference has no cluster"
            self.ready.set()
            self.done()

    def _set_up_and_grade(self, row: Row) -> dict[str, Any]:
        try:
            self.cluster = self.test.started("reference")
            self.test.solve(self.cluster, self.folder / "root")
            self.test.states.keep(None, self.cluster, self.folder / "root")
        except BaseException as error:
            self.failure = f"the reference could not be set up: {error}"
            self.machine = isinstance(error, MachineError)
            raise
        finally:
            self.test.states.release(None)
        before = ReferenceState.of(self.folder / "root", self.cluster)
        report = self.test.grade(self.folder, self.folder / "root", self.cluster, shared=True)
        row.problems += before.changes(ReferenceState.of(self.folder / "root", self.cluster))
        return report

    def prove_variant(self, variant: Variant) -> Row:
        def body() -> dict[str, Any]:
            if self.failure or self.cluster is None:
                raise (MachineError if self.machine else RowError)(self.failure or "the reference has no cluster")
            folder = self.test.row_dir(f"{variant.kind}-{variant.name}")
            root = copy_root(self.folder / "root", folder / "root")
            variant.apply_edits(root)
            return self.test.grade(folder, root, self.cluster, variant.grader_args, shared=True)

        self.ready.wait()  # the reference graded alone first, so that what its grading changed is its own
        try:
            return attempt(Row(variant.kind, variant), body, self.test.lab.name)
        finally:
            self.done()

    def done(self) -> None:
        """One user fewer; the cluster stops with the last."""
        with self._lock:
            self.users -= 1
            last = self.users == 0
        if last:
            self.close()

    def close(self) -> None:
        with self._lock:
            cluster, self.cluster = self.cluster, None
            self.failure = self.failure or "the reference's cluster is stopped"
        if cluster is not None:
            cluster.stop()
        if self.test.twins is not None:
            self.test.twins.close()  # the clusters lent to its rows' bundles


def attempt(row: Row, body: Callable[[], dict[str, Any]], lab: str) -> Row:
    """Grade a row and judge it; what kept it from being graded is its error."""
    started = time.monotonic()
    if row.variant is not None and (missing := [p for p in row.variant.requires if shutil.which(p) is None]):
        row.skipped = f"{', '.join(missing)} not on PATH"
        return row
    try:
        judge(row, body(), lab)
    except Exception as error:  # every row is reported; one that broke says why, with the others
        row.error = f"{type(error).__name__}: {error}" if not isinstance(error, RowError) else str(error)
        row.machine = isinstance(error, MachineError)
    row.seconds = time.monotonic() - started
    return row


def run_selftest(
    lab: Lab,
    *,
    jobs: int = 1,
    only: Sequence[str] = (),
    progress: Callable[[Row, int, int], None] | None = None,
    bundles: bool = True,
) -> list[Row]:
    """Every row of ``lab``'s proof, in the matrix's order: reference, untouched start, then each variant;
    with ``only``, the reference and the variants so named; with ``bundles``, each also graded from its bundle."""
    variants = [variant for variant in load_variants(lab.folder) if not only or variant.name in only]
    if unknown := sorted(set(only) - {variant.name for variant in variants}):
        raise VariantsError(f"{lab.folder / VARIANTS_FILE}: no variant named {unknown[0]!r}")
    with tempfile.TemporaryDirectory(prefix=f"gpulab-selftest-{lab.name}-") as work, WarmGradings() as gradings:
        test = Selftest(lab, Path(work), gradings, bundles=bundles)
        shared = SharedReference(test, sum(not variant.own_cluster for variant in variants))
        tasks: list[Callable[[], Row]] = [shared.prove] + ([] if only else [test.prove_start])
        # Files first: the reference's cluster stops once they are graded, before the ones with clusters of their own.
        for variant in sorted(variants, key=lambda variant: variant.own_cluster):
            tasks.append(partial(test.prove_alone if variant.own_cluster else shared.prove_variant, variant))
        try:
            rows = _run(tasks, jobs, progress)
        finally:
            shared.close()
    declared = [REFERENCE, START, *(variant.label for variant in variants)]
    return sorted(rows, key=lambda row: declared.index(row.variant.label if row.variant else row.kind))


def _run(tasks: list[Callable[[], Row]], jobs: int, progress: Callable[[Row, int, int], None] | None) -> list[Row]:
    rows: list[Row | None] = [None] * len(tasks)
    lock = threading.Lock()

    def run(index: int) -> None:
        row = rows[index] = tasks[index]()
        if progress is not None:
            with lock:
                progress(row, sum(done is not None for done in rows), len(rows))

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="gpulab-selftest") as pool:
        futures = [pool.submit(run, index) for index in range(len(tasks))]
        try:
            for future in futures:
                future.result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [row for row in rows if row is not None]
