"""Fixtures for graders: layers over the plain classes of this package.

An expensive session fixture holds the cluster connection (or an ephemeral
cluster); cheap function fixtures give each grader a read-only view of it, a
fresh fake containerd and a runner for learner scripts. Each is small and can
be overridden in a conftest.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from . import toolchain
from .containerd import FakeContainerd
from .feedback import fail
from .kwok import KwokCluster, KwokClusterError
from .labs import Lab
from .runner import ScriptResult, run_script
from .settings import RunSettings, effective_kubeconfig

if TYPE_CHECKING:
    from .live import LiveCluster

settings_key = pytest.StashKey[RunSettings]()

__all__ = [
    "feedback",
    "fake_containerd",
    "gpulab_settings",
    "lab",
    "lab_cluster",
    "lab_root",
    "learner_script",
    "live",
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
    root = gpulab_settings.lab_root or lab.default_root
    if not root.is_dir():
        fail(f"The lab directory {root} does not exist. Do the lab there, or point the grader at your directory with --lab-root PATH.")
    return root


@dataclass
class LabClusterConnection:
    """How this run reaches the lab cluster; ``error`` says why it cannot."""

    kubeconfig: str | None
    live: LiveCluster | None = None
    error: str | None = None


@pytest.fixture(scope="session")
def lab_cluster(gpulab_settings: RunSettings, lab: Lab) -> Iterator[LabClusterConnection]:
    """The learner's running cluster, or a fresh one with ``--lab-cluster=ephemeral``."""
    cluster = None
    kubeconfig = effective_kubeconfig(gpulab_settings.kubeconfig, lab)
    if gpulab_settings.lab_cluster == "ephemeral":
        cluster = KwokCluster.for_lab(lab.name)
        try:
            cluster.start()
        except KwokClusterError as error:
            yield LabClusterConnection(None, error=f"the ephemeral lab cluster could not start: {error}")
            return
        kubeconfig = str(cluster.kubeconfig)
    connection = _connect(kubeconfig)
    try:
        yield connection
    finally:
        if connection.live is not None:
            connection.live.close()
        if cluster is not None:
            try:
                cluster.stop()
            except KwokClusterError as error:
                # The steps are graded; a cleanup problem is the machine's, not the learner's.
                warnings.warn(f"the ephemeral lab cluster did not stop cleanly: {error}", stacklevel=1)


def _connect(kubeconfig: str | None) -> LabClusterConnection:
    # Imported here: the kubernetes client is slow to import, and `pytest --help` needs none of it.
    from .live import ClusterUnreachable, LiveCluster

    try:
        live = LiveCluster.from_kubeconfig(kubeconfig)
        live.probe()
    except ClusterUnreachable as error:
        return LabClusterConnection(kubeconfig, error=str(error))
    return LabClusterConnection(kubeconfig, live=live)


@pytest.fixture
def live(lab_cluster: LabClusterConnection, lab: Lab) -> LiveCluster:
    """Read-only access to the lab cluster; an unreachable cluster fails the step with a message."""
    if lab_cluster.live is None:
        fail(
            f"Could not reach the lab cluster: {lab_cluster.error}. Start it (e.g. `gpulab up {lab.name}`) "
            "and point the grader at it with --kubeconfig or KUBECONFIG."
        )
    return lab_cluster.live


@pytest.fixture
def fake_containerd(tmp_path: Path) -> FakeContainerd:
    """A fresh fake ``containerd`` for this test: choose its dump, then read its calls."""
    return FakeContainerd(tmp_path / "fake-containerd")


@dataclass
class LearnerScripts:
    """Runs learner scripts as untrusted code: scratch cwd, closed stdin, timeout, bounded output."""

    scratch: Path
    fake_containerd: FakeContainerd
    timeout: float
    request: pytest.FixtureRequest

    def run(self, script: Path, *args: str, dump: str | None = None, cluster: bool = False) -> ScriptResult:
        """Run ``script``; ``dump`` names the fake containerd's dump; ``cluster`` gives the script the
        lab cluster's kubeconfig and the pinned kubectl, for steps whose scripts read the cluster."""
        __tracebackhide__ = True
        if not script.is_file():
            fail(f"{script} does not exist; create it as the step asks.")
        if dump is not None:
            self.fake_containerd.serve_dump(dump)
        path_prefix: list[Path] = [self.fake_containerd.bin_dir]
        extra_env: dict[str, str] = {}
        if cluster:
            kubeconfig = self.request.getfixturevalue("lab_cluster").kubeconfig
            if kubeconfig:
                extra_env["KUBECONFIG"] = kubeconfig
            path_prefix.append(toolchain.bin_dir())
        self.scratch.mkdir(parents=True, exist_ok=True)
        return run_script(script, args, cwd=self.scratch, path_prefix=path_prefix, extra_env=extra_env, timeout=self.timeout)


@pytest.fixture
def learner_script(
    tmp_path: Path, fake_containerd: FakeContainerd, gpulab_settings: RunSettings, request: pytest.FixtureRequest
) -> LearnerScripts:
    """``learner_script.run(path, *args, dump="v2-runc-nvidia")`` with the fake containerd first on PATH."""
    return LearnerScripts(
        scratch=tmp_path / "scratch",
        fake_containerd=fake_containerd,
        timeout=gpulab_settings.script_timeout,
        request=request,
    )


class Feedback:
    """Notes for the learner on a step that passes (or fails) for another reason."""

    def __init__(self, item: pytest.Item) -> None:
        self._item = item

    def note(self, text: str) -> None:
        if ("gpulab_note", text) not in self._item.user_properties:
            self._item.user_properties.append(("gpulab_note", text))


@pytest.fixture
def feedback(request: pytest.FixtureRequest) -> Feedback:
    return Feedback(request.node)
