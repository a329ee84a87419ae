"""Fixtures for graders: layers over the plain classes of this package.

An expensive session fixture holds the cluster connection (or an ephemeral
cluster); cheap function fixtures give each check a read-only view of it, a
fresh fake containerd and a runner for learner scripts. Each is small and can
be overridden in a conftest.py.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .budget import runner_key
from .cluster.kwok import KwokCluster, KwokClusterError
from .grading import evidence
from .grading.feedback import GradingError, fail
from .grading.learner import LearnerWork
from .grading.scripts.checker import Checker
from .grading.scripts.contract import plan
from .grading.scripts.runs import holding, release_held
from .grading.scripts.script_runner import LearnerScripts, ScriptRunner
from .labs.discovery import Lab
from .labs.nearmisses import identities
from .sandbox import confine as sandbox
from .sandbox.containerd import FakeContainerd
from .settings import RunSettings, effective_kubeconfig, settings_key

if TYPE_CHECKING:
    from .cluster.copy import CopyAhead
    from .grading.live import LiveCluster

connection_key = pytest.StashKey["LabClusterConnection"]()  # for the report's count of cluster reads

__all__ = [
    "contract_runs_ahead",
    "fake_containerd",
    "feedback",
    "gpulab_settings",
    "lab",
    "lab_cluster",
    "lab_random",
    "lab_root",
    "learner",
    "learner_script",
    "live",
    "near_miss_cluster",
    "script_runner",
    "step_random",
]


@pytest.fixture(scope="session")
def gpulab_settings(pytestconfig: pytest.Config) -> RunSettings:
    return pytestconfig.stash[settings_key]


@pytest.fixture(scope="session")
def lab(gpulab_settings: RunSettings) -> Lab:
    if gpulab_settings.lab is None:
        raise pytest.UsageError("no lab chosen: run `pytest --lab NAME` (or set GPULAB_LAB / gpulab_lab).")
    return gpulab_settings.lab


@pytest.fixture(scope="session")
def lab_root(gpulab_settings: RunSettings, lab: Lab) -> Path:
    """The learner's lab directory; graders only read below it."""
    root = lab.learner_root(gpulab_settings.lab_root)
    if not root.is_dir():
        fail(
            f"The lab directory {root} does not exist. Do the lab there, or point the grader at your directory with --lab-root PATH."
        )
    return root


@pytest.fixture(scope="session")
def learner(lab_root: Path, lab: Lab, gpulab_settings: RunSettings) -> LearnerWork:
    """The learner's files: ``learner.file("out/merge.txt").key_values("MAIN_RUNTIMES")``; a path the learner
    wrote under the root where it stood (recorded in a bundle) or the lab's default root reads the same files."""
    homes = (gpulab_settings.lab_root_recorded, str(lab.default_root))
    return LearnerWork(lab_root, tuple(home for home in homes if home))


@dataclass
class LabClusterConnection:
    """How this run reaches the lab cluster; ``error`` says why it cannot."""

    kubeconfig: str | None
    lab: str
    live: LiveCluster | None = None
    error: str | None = None
    copy_ahead: CopyAhead | None = None  # the near-miss copy, made from the start when a check will ask for it

    def live_or_fail(self) -> LiveCluster:
        """The read-only cluster, or the step's error saying how to reach it."""
        __tracebackhide__ = True
        if self.live is None:
            raise GradingError(
                f"Could not reach the lab cluster (kubeconfig {self.kubeconfig or '~/.kube/config'}): {self.error}. "
                f"Start it (e.g. `gpulab up {self.lab}`) "
                "and point the grader at it with --kubeconfig or KUBECONFIG."
            )
        return self.live


@pytest.fixture(scope="session")
def lab_cluster(
    gpulab_settings: RunSettings,
    lab: Lab,
    pytestconfig: pytest.Config,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LabClusterConnection]:
    """The learner's running cluster, or a fresh one with ``--lab-cluster=ephemeral``; when a check collected
    will ask for ``near_miss_cluster``, its copy is begun at once, beside the checks before it."""
    cluster = None
    kubeconfig = effective_kubeconfig(gpulab_settings.kubeconfig, lab)
    if gpulab_settings.lab_cluster == "ephemeral":
        cluster = KwokCluster.for_lab(lab)
        try:
            cluster.start()
        except KwokClusterError as error:
            yield LabClusterConnection(None, lab.name, error=f"the ephemeral lab cluster could not start: {error}")
            return
        kubeconfig = str(cluster.kubeconfig)
    connection = pytestconfig.stash[connection_key] = _connect(kubeconfig, lab.name)
    if connection.live is not None and lab.near_misses and _asked_for(request.session, "near_miss_cluster"):
        with contextlib.suppress(KwokClusterError):  # the checks that ask for the copy say why there is none
            connection.copy_ahead = _copy_ahead(connection.live, lab, tmp_path_factory)
    try:
        yield connection
    finally:
        if connection.copy_ahead is not None:
            connection.copy_ahead.close()
        if connection.live is not None:
            connection.live.close()
        if cluster is not None:
            try:
                cluster.stop()
            except KwokClusterError as error:
                # The steps are graded; a cleanup problem is the machine's, not the learner's.
                warnings.warn(f"the ephemeral lab cluster did not stop cleanly: {error}", stacklevel=1)


def _asked_for(session: pytest.Session, fixture: str) -> bool:
    return any(fixture in getattr(item, "fixturenames", ()) for item in session.items)


def _copy_ahead(live: LiveCluster, lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> CopyAhead:
    """The near-miss copy, begun; :class:`KwokClusterError` when the lab's near-miss files cannot be read."""
    from .cluster.copy import CopyAhead, manifests_in

    return CopyAhead(live.source, manifests_in(lab.near_misses), tmp_path_factory.mktemp("copy"))


def _connect(kubeconfig: str | None, lab: str) -> LabClusterConnection:
    # Imported here: the kubernetes client is slow to import, and `pytest --help` needs none of it.
    from .grading.live import ClusterUnreachable, LiveCluster

    try:
        live = LiveCluster.from_kubeconfig(kubeconfig)
        live.probe()
    except ClusterUnreachable as error:
        return LabClusterConnection(kubeconfig, lab, error=str(error))
    return LabClusterConnection(kubeconfig, lab, live=live)


@pytest.fixture(scope="session")
def near_miss_cluster(
    lab: Lab, lab_cluster: LabClusterConnection, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveCluster]:
    """A copy of the learner's cluster with the lab's near-miss objects added (``lab.toml`` ``near_misses``), read
    only: objects the lab never makes, for its checkers to meet. Made once, by the first check that asks; the
    learner's own cluster is never changed. Its ``source`` is the copy's kubeconfig, for a :class:`DoctoredView`."""
    from .grading.live import ClusterUnreachable, LiveCluster

    live = lab_cluster.live_or_fail()
    if not lab.near_misses:
        raise GradingError(f"lab {lab.name} declares no near_misses in its lab.toml, so there is no copy to run on.")
    release_held()  # the runs a step asked for ahead go while the copy is made
    try:
        ahead = lab_cluster.copy_ahead or _copy_ahead(live, lab, tmp_path_factory)
        try:
            copied = LiveCluster.from_kubeconfig(str(ahead.result().kubeconfig))
            evidence.note_copy(copied.host, identities(lab))
            try:
                yield copied
            finally:
                copied.close()
        finally:
            if ahead is not lab_cluster.copy_ahead:
                ahead.close()
    except (KwokClusterError, ClusterUnreachable) as error:
        raise GradingError(f"A copy of the lab cluster with the near-miss objects could not be made: {error}") from None


@pytest.fixture
def live(lab_cluster: LabClusterConnection) -> LiveCluster:
    """Read-only access to the lab cluster; an unreachable cluster fails the check with a message."""
    return lab_cluster.live_or_fail()


@pytest.fixture
def fake_containerd(tmp_path: Path) -> FakeContainerd:
    """A fresh fake ``containerd`` for this check: choose its dump, then read its calls."""
    return FakeContainerd(tmp_path / "fake-containerd")


@pytest.fixture(scope="session")
def script_runner(
    tmp_path_factory: pytest.TempPathFactory, gpulab_settings: RunSettings, lab: Lab, request: pytest.FixtureRequest
) -> Iterator[ScriptRunner]:
    """Runs learner scripts for any scope (e.g. a step module's fixture shared by its checks), sandboxed."""

    def kubeconfig() -> str | None:
        connection: LabClusterConnection = request.getfixturevalue("lab_cluster")
        connection.live_or_fail()  # a checker run on an unreachable cluster is an error, not a wrong answer
        return connection.kubeconfig

    root = lab.learner_root(gpulab_settings.lab_root).absolute()
    runner = ScriptRunner(
        tmp_path_factory.mktemp("learner-scripts"),
        gpulab_settings.script_timeout,
        kubeconfig,
        lab_root=root if root.is_dir() else None,
        sandbox=sandbox.probe(),
    )
    request.config.stash[runner_key] = runner  # the grading's budget says which scripts used its time
    yield runner
    runner.close()


@pytest.fixture(scope="module", autouse=True)
def contract_runs_ahead(request: pytest.FixtureRequest) -> None:
    """In a step that declares a :class:`Checker`, every run its contract checks will read, started at the step's
    first check, beside the step's own (:func:`~pytest_gpulab.grading.scripts.contract.plan`). A step whose
    ``checker_cases`` cannot be made starts none: each check that asks for them says why."""
    from .collect import StepModule

    checkers = [value for value in vars(request.module).values() if isinstance(value, Checker)]
    if not checkers or not isinstance(request.node, StepModule):
        return
    with holding():  # the step's own runs wait for the plan, which may make one of them serve two checks
        try:
            cases = request.getfixturevalue("checker_cases")
        except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # pytest keeps it: the checks raise it
            return
        for checker in checkers:
            plan(checker, cases)


@pytest.fixture
def learner_script(script_runner: ScriptRunner, fake_containerd: FakeContainerd, tmp_path: Path) -> LearnerScripts:
    """``learner_script.run(path, *args, dump="v2-runc-nvidia")`` with this check's fake containerd first on PATH."""
    return LearnerScripts(script_runner, fake_containerd, tmp_path / "scratch")


class LabRandom(random.Random):
    """A check's random choices, the same for the same run seed (``--lab-seed``) and check, whatever else runs."""

    def __init__(self, run_seed: int, check: str) -> None:
        super().__init__(f"{run_seed}/{check}")
        self.run_seed = run_seed

    @property
    def detail(self) -> dict[str, object]:
        """For the instructor's detail: how to replay this check's choices."""
        return {"seed": self.run_seed, "replay": f"--lab-seed={self.run_seed}"}


@pytest.fixture
def lab_random(gpulab_settings: RunSettings, request: pytest.FixtureRequest) -> LabRandom:
    """Random choices a grader makes (a generated dump's missing handlers), seeded from the run's seed."""
    return LabRandom(gpulab_settings.seed, request.node.nodeid)


@pytest.fixture(scope="module")
def step_random(gpulab_settings: RunSettings, request: pytest.FixtureRequest) -> LabRandom:
    """Random choices a step makes once for all its checks, drawn in a fixed order (so its scripts can
    run ahead, side by side), seeded from the run's seed."""
    return LabRandom(gpulab_settings.seed, request.node.nodeid)


class Feedback:
    """Notes for the learner on a check that passes (or fails) for another reason."""

    def __init__(self, item: pytest.Item) -> None:
        self._item = item

    def note(self, text: str) -> None:
        if ("gpulab_note", text) not in self._item.user_properties:
            self._item.user_properties.append(("gpulab_note", text))


@pytest.fixture
def feedback(request: pytest.FixtureRequest) -> Feedback:
    return Feedback(request.node)
