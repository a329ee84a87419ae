"""Grading a submission bundle away from the learner's machine: ``gpulab grade BUNDLE``.

The bundle is opened into a directory of the grader's own; a lab cluster
starts on the bundle's snapshot (etcd and the API server: nothing acts on the
frozen state); then ``pytest --lab`` grades the bundled lab root
against it, exactly as on the learner's machine, and writes the same reports.
The seed is an HMAC of the bundle's sha256 under the instructor's secret (``--seed-secret FILE``, else a
file made once beside ``OUT``, mode 0600): a re-grade makes the same random choices, and no learner can
choose them by shaping the bundle. ``OUT`` gets::

    report.json     the grading report (``--gpulab-report``)
    results.json    Gradescope's results (``--gradescope-results``)
    junit.xml       JUnit
    output.txt      what pytest printed
    bundle.json     the bundle's manifest
    outcome.json    written last: graded, refused (with why) or error (try again)

Usable without pytest: :func:`grade_bundle`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..cluster import snapshot
from ..cluster.addresses import addressed_home
from ..cluster.kwok import KwokCluster, KwokClusterError
from ..labs.discovery import UnknownLab, discover
from ..reports.report_file import write_atomically
from ..sandbox.confine import Sandbox, probe
from .bundle import sha256_file, tool_versions
from .unbundle import BundleRefused, OpenedBundle, open_bundle
from .warm import COLD, Gradings

GRADED, REFUSED, ERROR = "graded", "refused", "error"
SECRET_FILE = ".gpulab-seed-secret"
GRADING_TIMEOUT = 1800.0
CLUSTER_ATTEMPTS = 2


@dataclass
class Outcome:
    """What became of one bundle: ``outcome.json``."""

    learner: str
    bundle: str
    bundle_sha256: str
    status: str = ERROR
    reason: str | None = None
    lab: str | None = None
    rubric_bundled: str | None = None
    rubric_graded: str | None = None
    seed: int | None = None
    earned: int | None = None
    possible: int | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def learner_name(bundle: Path) -> str:
    name = bundle.name
    for suffix in (".gpulab.tar.gz", ".tar.gz", ".tgz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _timed(outcome: Outcome, phase: str, started: float) -> float:
    now = time.monotonic()
    outcome.seconds[phase] = round(now - started, 3)
    return now


def _version_warnings(manifest: dict[str, Any]) -> list[str]:
    ours, theirs = tool_versions(), manifest.get("tools") or {}
    return [
        f"bundled with {tool} {theirs.get(tool)}, graded with {ours[tool]}"
        for tool in ("kubernetes", "etcd", "kwok")
        if theirs.get(tool) != ours[tool]
    ]


def _pytest_args(
    opened: OpenedBundle, kubeconfig: Path, out: Path, seed: int, lab_dirs: Sequence[Path], extra: Sequence[str]
) -> list[str]:
    return [
        f"--lab={opened.lab}", f"--lab-root={opened.root}",
        f"--kubeconfig={kubeconfig}", f"--lab-seed={seed}", f"--gpulab-report={out / 'report.json'}",
        f"--gradescope-results={out / 'results.json'}", f"--junitxml={out / 'junit.xml'}",
        "-p", "no:cacheprovider", "--color=no", *(f"--lab-dir={path}" for path in lab_dirs),
        *([f"--lab-root-recorded={opened.recorded_root}"] if opened.recorded_root else []), *extra,
    ]  # fmt: skip


Restore = Callable[[Path], AbstractContextManager[KwokCluster]]  # a cluster started on a snapshot, for the grading


@dataclass(frozen=True)
class _Grading:
    """One bundle's grading: the opened bundle, its outcome and results folder, and how to run pytest."""

    opened: OpenedBundle
    outcome: Outcome
    out: Path
    work: Path
    lab_dirs: Sequence[Path]
    gradings: Gradings
    extra: Sequence[str] = ()
    restore: Restore = snapshot.grading_cluster


def _grade_restored(job: _Grading) -> None:
    outcome, started = job.outcome, time.monotonic()
    with job.restore(job.opened.snapshot) as cluster:
        started = _timed(outcome, "cluster_start", started)
        if home := addressed_home(cluster.api.items):
            raise BundleRefused(
                f"the bundle's cluster holds {', '.join(home[:5])}: an address that is the grading machine's own "
                "(loopback, link-local or one of its interfaces), which the API server could be made to call; no lab "
                "makes one"
            )
        if calling := snapshot.calling_out(cluster):
            raise BundleRefused(
                f"the bundle's cluster holds {', '.join(calling)}, which would have the grading cluster's API "
                "server call out to an address of the bundle's choosing; no lab makes one"
            )
        run_dir = job.work / "run"  # pytest's rootdir: nothing of the learner's is in it
        run_dir.mkdir(exist_ok=True)
        args = _pytest_args(job.opened, cluster.kubeconfig, job.out, outcome.seed or 0, job.lab_dirs, job.extra)
        returncode = job.gradings.run(
            args, cwd=run_dir, env=cluster.environment(), output=job.out / "output.txt", timeout=GRADING_TIMEOUT
        )
        _timed(outcome, "grading", started)
    _read_report(outcome, job.out, returncode)


def _grade_with_a_second_try(job: _Grading) -> None:
    """A cluster that did not come up on the snapshot is not the bundle's fault (a snapshot etcd cannot restore
    is): a second one is tried, and what the failure said kept in ``cluster-logs.txt``. Nor is a script starved
    of CPU by a busy machine (``MachineBusy``): the bundle is graded again."""
    for attempt in range(1, CLUSTER_ATTEMPTS + 1):
        try:
            _grade_restored(job)
        except KwokClusterError as error:
            (job.out / "cluster-logs.txt").write_text(f"attempt {attempt}: {error}\n")
            if attempt == CLUSTER_ATTEMPTS:
                raise
            job.outcome.warnings.append(f"attempt {attempt}: {error}; graded in another cluster")
            continue
        busy = _busy_checks(job.out)
        if not busy or attempt == CLUSTER_ATTEMPTS:
            return
        job.outcome.warnings.append(
            f"attempt {attempt}: {', '.join(busy)} ran out of time on a busy machine (MachineBusy); graded again"
        )


def _busy_checks(out: Path) -> list[str]:
    """The checks whose scripts the machine starved, as the report names them."""
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        return []
    return [
        str(check.get("id") or check.get("name"))
        for step in report.get("steps") or []
        for check in step.get("checks") or []
        if check.get("error") == "MachineBusy"
    ]


def _read_report(outcome: Outcome, out: Path, returncode: int) -> None:
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        report = {}
    if returncode not in (0, 1) or not report.get("complete"):
        outcome.reason = f"pytest ended with exit status {returncode} before the grading was complete; see output.txt"
        return
    outcome.status, outcome.earned, outcome.possible = GRADED, report["earned"], report["possible"]
    outcome.rubric_graded = report.get("rubric_version")


def seed_secret(folder: Path, given: Path | None = None) -> bytes:
    """The instructor's secret the seeds are keyed with: the file ``given`` holds, else ``folder``'s own, made once
    (mode 0600, linked into place whole, so parallel gradings agree on it)."""
    if given is not None:
        secret = given.read_bytes().strip()
        if not secret:
            raise OSError(f"the seed secret {given} is empty")
        return secret
    path = folder / SECRET_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        draft = folder / f".{SECRET_FILE}.{secrets.token_hex(8)}"
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            stream.write(secrets.token_hex(32))
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
        draft.unlink()
    return path.read_bytes().strip()


def keyed_seed(secret: bytes, bundle_sha256: str) -> int:
    """The graders' seed for a bundle: an HMAC of its bytes' digest, which only the secret's holder can compute."""
    return int(hmac.new(secret, bundle_sha256.encode(), hashlib.sha256).hexdigest()[:8], 16)


def _open(
    bundle: Path, outcome: Outcome, work: Path, lab_dirs: Sequence[Path], seed: int | None, secret: bytes
) -> OpenedBundle:
    opened = open_bundle(bundle, work / "bundle")
    manifest = opened.manifest
    outcome.lab, outcome.rubric_bundled = opened.lab, str(manifest.get("rubric_version"))
    outcome.seed = seed if seed is not None else keyed_seed(secret, outcome.bundle_sha256)
    outcome.warnings = _version_warnings(manifest)
    try:
        discover(lab_dirs).get(opened.lab)
    except UnknownLab as error:
        raise BundleRefused(f"the bundle is of lab {opened.lab!r}, which this grader does not have: {error}") from None
    return opened


def scripts_unconfined(sandbox: Sandbox) -> str | None:
    """Why a bundle may not be graded on this machine: its scripts would run as the grader's own user, who can
    read and write every bundle and result (no sandbox, and not root to give each a uid of its own)."""
    if sandbox.namespaces or sandbox.run_uids is not None:
        return None
    return (
        "this machine cannot confine learner scripts, which would run as the grader's own user and reach every "
        f"bundle and result: {'; '.join(sandbox.missing)}. In a Pod, allow what bubblewrap needs (user namespaces: "
        "the Job's seccomp profile and a kernel that permits them), or grade where it runs"
    )


def grade_bundle(
    bundle: Path,
    out: Path,
    *,
    learner: str | None = None,
    seed: int | None = None,
    lab_dirs: Sequence[Path] = (),
    gradings: Gradings = COLD,
    extra_args: Sequence[str] = (),
    seed_secret_file: Path | None = None,
    restore: Restore = snapshot.grading_cluster,
) -> Outcome:
    """Grade one bundle into ``out``; never raises for a bad bundle or a failed cluster (see the outcome).
    ``gradings`` runs the ``pytest --lab`` process: a new interpreter, or a :class:`WarmGradings` fork;
    ``extra_args`` are the instructor's own options for it (``--script-timeout``); ``seed_secret_file`` the secret
    the seed is keyed with (default: one made once beside ``out``); ``restore`` starts the cluster the grading reads
    on the bundle's snapshot (a fresh one each time; the self-test's twins lend one per snapshot, ``selftest/twin.py``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "outcome.json").unlink(missing_ok=True)
    outcome = Outcome(learner or learner_name(bundle), bundle.name, sha256_file(bundle) if bundle.is_file() else "")
    started = time.monotonic()
    if (unsafe := scripts_unconfined(probe())) is not None:
        outcome.reason = unsafe
        write_atomically(out / "outcome.json", outcome.as_dict())
        return outcome
    with tempfile.TemporaryDirectory(prefix="gpulab-grade-") as work:
        try:
            secret = seed_secret(out.parent, seed_secret_file) if seed is None else b""
            opened = _open(bundle, outcome, Path(work), lab_dirs, seed, secret)
            write_atomically(out / "bundle.json", opened.manifest)
            _timed(outcome, "open", started)
            job = _Grading(opened, outcome, out, Path(work), lab_dirs, gradings, extra_args, restore)
            _grade_with_a_second_try(job)
        except (BundleRefused, snapshot.SnapshotRefused) as refusal:
            outcome.status, outcome.reason = REFUSED, str(refusal)
        except (KwokClusterError, subprocess.TimeoutExpired, OSError) as error:
            outcome.status, outcome.reason = ERROR, f"the grading could not run: {error}"
    outcome.seconds["total"] = round(time.monotonic() - started, 3)
    write_atomically(out / "outcome.json", outcome.as_dict())
    return outcome
