"""Grading a folder of bundles on one machine: ``gpulab grade-batch DIR --jobs N --out RESULTS``.

Each bundle is graded in its own fresh cluster, N at a time, into
``RESULTS/<learner>/`` (the learner is the bundle's file name without
``.gpulab.tar.gz``). A bundle whose ``outcome.json`` already says graded or
refused, for the same bundle bytes and the same rubric, is not graded again, so
an interrupted batch started again resumes where it stopped, and a rubric fix
re-grades everything. An error (the grading could not run) is tried again on the
next run. Usable without pytest: :func:`grade_batch`.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..labs.discovery import discover
from ..reports.report_file import write_atomically
from .bundle import sha256_file
from .model import REFUSED_FILE
from .regrade import ERROR, GRADED, REFUSED, Outcome, grade_bundle, learner_name
from .warm import COLD, Gradings, WarmGradings

BUNDLE_PATTERNS = ("*.gpulab.tar.gz", "*.tar.gz", "*.tgz")


def bundles_in(directory: Path) -> list[Path]:
    """The folder's bundles, by name: the order every run and every Job index agrees on."""
    return sorted({path for pattern in BUNDLE_PATTERNS for path in directory.glob(pattern) if path.is_file()})


LEARNER_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def name_refusal(name: str) -> str | None:
    """Why a learner's name cannot name a row of the results, or None: letters, digits, '.', '_' and '-', not
    starting with a dot, at most 64 characters, and no name the batch writes (cohort.*, index.html)."""
    if not LEARNER_NAME.fullmatch(name):
        return (
            f"the learner name {name!r} is not 1 to 64 letters, digits, '.', '_' or '-' (not starting with a dot): "
            "rename the bundle"
        )
    if name.lower().startswith("cohort.") or name.lower() == "index.html":
        return f"the learner name {name!r} is one the batch writes its cohort report under: rename the bundle"
    return None


def results_folders(
    bundles: Sequence[Path], roster: dict[str, str] | None = None
) -> tuple[dict[Path, str], dict[Path, str]]:
    """Each bundle's folder in the results, its learner's name (the roster's, else the file's name without its
    suffix), and the bundles refused with why: a bad name, a name two bundles share (case folded: both are
    refused, neither takes the other's row), or, with a roster, a bundle not on it."""
    named, refused = {}, {}
    for bundle in bundles:
        name = roster.get(bundle.name) if roster is not None else learner_name(bundle)
        reason = "the bundle is not on the roster" if name is None else name_refusal(name)
        if reason is None and name is not None:
            named[bundle] = name
        else:
            refused[bundle] = reason or "the bundle has no learner name"
    folded: dict[str, list[Path]] = {}
    for bundle, name in named.items():
        folded.setdefault(name.lower(), []).append(bundle)
    for clash in (group for group in folded.values() if len(group) > 1):
        for bundle in clash:
            others = ", ".join(other.name for other in clash if other != bundle)
            refused[bundle] = f"its learner name {named.pop(bundle)!r} is also the name of {others}: rename one"
    return named, refused


def read_roster(path: Path) -> dict[str, str]:
    """A roster CSV, ``learner,file`` per line (a header line is allowed): the bundle file name -> the learner."""
    roster = {}
    with open(path, newline="", encoding="utf-8") as stream:
        for row in csv.reader(stream):
            if len(row) >= 2 and row[0].strip() and row[0].strip().lower() != "learner":
                roster[Path(row[1].strip()).name] = row[0].strip()
    return roster


def grade_safely(
    bundle: Path, out: Path, lab_dirs: Sequence[Path] = (), gradings: Gradings = COLD, secret: Path | None = None
) -> Outcome:
    """:func:`grade_bundle`, and a grader bug recorded as that bundle's error rather than the batch's end."""
    try:
        return grade_bundle(
            bundle, out, learner=out.name, lab_dirs=lab_dirs, gradings=gradings, seed_secret_file=secret
        )
    except Exception as error:  # one bundle's failure must not stop the others
        outcome = Outcome(out.name, bundle.name, "", ERROR, f"the grader failed: {error!r}")
        write_atomically(out / "outcome.json", outcome.as_dict())
        return outcome


def current_rubrics(lab_dirs: Sequence[Path] = ()) -> dict[str, str]:
    catalog = discover(lab_dirs)
    return {name: catalog.labs[name].rubric_version for name in catalog.names}


def finished(out: Path, bundle: Path, rubrics: dict[str, str]) -> Outcome | None:
    """The outcome already there for these bundle bytes and the current rubric, if the bundle need not be graded again."""
    try:
        recorded = json.loads((out / "outcome.json").read_text())
        outcome = Outcome(**recorded)
    except (OSError, ValueError, TypeError):
        return None
    if outcome.status not in (GRADED, REFUSED) or outcome.bundle_sha256 != sha256_file(bundle):
        return None
    if outcome.status == GRADED and rubrics.get(outcome.lab or "") != outcome.rubric_graded:
        return None
    return outcome


@dataclass
class Progress:
    """A progress bar on a terminal; elsewhere a line per bundle."""

    total: int
    stream: TextIO = sys.stderr
    done: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {GRADED: 0, REFUSED: 0, ERROR: 0, "resumed": 0})
    started: float = field(default_factory=time.monotonic)

    def advance(self, outcome: Outcome, resumed: bool = False) -> None:
        self.done += 1
        self.counts["resumed" if resumed else outcome.status] += 1
        if self.stream.isatty():
            self.stream.write("\r" + self.bar() + ("\n" if self.done == self.total else ""))
        else:
            said = "already graded" if resumed else outcome.status
            self.stream.write(f"[{self.done}/{self.total}] {outcome.learner}: {said}{self._points(outcome)}\n")
        self.stream.flush()

    @staticmethod
    def _points(outcome: Outcome) -> str:
        if outcome.status == GRADED:
            return f" {outcome.earned}/{outcome.possible}"
        return f" ({outcome.reason})" if outcome.reason else ""

    def bar(self, width: int = 30) -> str:
        filled = width * self.done // max(self.total, 1)
        elapsed = time.monotonic() - self.started
        graded = self.done - self.counts["resumed"]
        left = elapsed / graded * (self.total - self.done) if graded else 0.0
        counts = " · ".join(f"{value} {key}" for key, value in self.counts.items() if value)
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} · {counts} · {elapsed:.0f}s, ~{left:.0f}s left"


def grade_batch(
    directory: Path,
    out: Path,
    jobs: int = 1,
    *,
    lab_dirs: Sequence[Path] = (),
    progress: Callable[[int], Progress] = Progress,
    seed_secret: Path | None = None,
    roster: dict[str, str] | None = None,
) -> list[Outcome]:
    """Grade every bundle in ``directory`` into ``out``; return the outcomes in the bundles' order. The seeds are
    keyed with ``seed_secret`` (a file), else with a secret made once in ``out``. A bundle whose learner name is
    refused (:func:`results_folders`; ``roster`` maps file names to learners) is not graded: it is listed, with
    why, in ``out/cohort.refused.json``."""
    bundles = bundles_in(directory)
    folders, refused = results_folders(bundles, roster)
    out.mkdir(parents=True, exist_ok=True)
    listed = [{"bundle": bundle.name, "reason": why} for bundle, why in sorted(refused.items())]
    write_atomically(out / REFUSED_FILE, {"refused": listed})
    bundles = [bundle for bundle in bundles if bundle in folders]
    rubrics, bar = current_rubrics(lab_dirs), progress(len(bundles))
    outcomes: dict[Path, Outcome] = {}
    pending: list[Path] = []
    for bundle in bundles:
        if (already := finished(out / folders[bundle], bundle, rubrics)) is not None:
            outcomes[bundle] = already
            bar.advance(already, resumed=True)
        else:
            pending.append(bundle)
    with WarmGradings() as gradings, ThreadPoolExecutor(max(1, jobs), thread_name_prefix="gpulab-grade") as pool:
        running: dict[Future[Outcome], Path] = {
            pool.submit(grade_safely, bundle, out / folders[bundle], lab_dirs, gradings, seed_secret): bundle
            for bundle in pending
        }
        try:
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    outcomes[running.pop(future)] = future.result()
                    bar.advance(future.result())
        except KeyboardInterrupt:
            pool.shutdown(wait=True, cancel_futures=True)  # the running ones finish; the rest wait for the next run
            raise
    return [outcomes[bundle] for bundle in bundles]
