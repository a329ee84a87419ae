"""Shared fixtures for the plugin's own tests: real lab clusters, never mocks."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cohort_cases import CohortBuilder, CohortRun

from pytest_gpulab.cluster import toolchain
from pytest_gpulab.cluster.kwok import KwokCluster

COHORT_MODULES = ("tests/test_bundles.py", "tests/test_grading_elsewhere.py")  # gpuop_cohort's tests
SPLIT_MODULES = ("tests/test_selftest.py",)  # long tests that share nothing costly
CONTAINER_MODULES = ("tests/test_container_job.py", "tests/test_real_node.py")  # one image, built once, in turn
COHORT_SCRIPT_TIMEOUT = 5
LONGEST_FIRST = (
    *COHORT_MODULES, *SPLIT_MODULES, *CONTAINER_MODULES, "tests/test_fair_time.py", "tests/test_scale.py",
    "tests/test_hostile_batch.py", "tests/test_hostile_time.py",
)  # fmt: skip


# A module that names one of these brings up a lab cluster (or grades on one): its tests are marked `cluster`,
# and `pytest -m "not cluster"` is the quick subset for the inner loop.
CLUSTER_WORDS = (
    "KwokCluster", "gpuop_cluster", "fresh_cluster", "gpuop_cohort", "solved_cluster", "grade-batch", "grade_bundle",
    "selftest", "json_report", "lab_cluster", "gpulab(\"up\"",
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first, so that under pytest-xdist no worker is left alone with one at the end; a
    module's tests that need a cluster marked `cluster`."""
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    needs: dict[Path, bool] = {}
    for item in items:
        if item.path not in needs:
            needs[item.path] = any(word in item.path.read_text() for word in CLUSTER_WORDS)
        if needs[item.path]:
            item.add_marker(pytest.mark.cluster)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist sends a module's tests to one worker (its module fixtures are made once), the generated
    cohort's modules together (it is made and graded once), the grader's image's modules together (it is built
    once, and a real node's Pods want the machine's cores), and the self-tests one by one."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # in the order above, not by tests per scope (the self-tests last)

    class Scopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            if module in COHORT_MODULES:
                return "gpuop-cohort"
            if module in CONTAINER_MODULES:
                return "containers"
            return nodeid if module in SPLIT_MODULES else super()._split_scope(nodeid)

    return Scopes(config, log)


@pytest.fixture(scope="session", autouse=True)
def suite_environment() -> Iterator[None]:
    """The environment every test and the gradings it starts get, restored at the end:

    - the binaries' directory named explicitly: pytester moves HOME, and the cache lives under it;
    - compiled (and assertion-rewritten) modules kept, as on a learner's machine, where nothing sets
      PYTHONDONTWRITEBYTECODE: else each of some thousand gradings compiles the plugin anew;
    - the virtualenv's bin first on PATH, as when it is activated: a learner script's `python3` is the venv's
      interpreter, not a version manager's shim (pyenv's is some ten bash processes, 40 ms a call, a fifth of a
      gpurt grading)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPULAB_BIN_DIR", str(toolchain.bin_dir()))
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        patch.setenv("PATH", str(Path(sys.executable).parent), prepend=os.pathsep)
        yield


@pytest.fixture(scope="session")
def gpuop_cluster() -> Iterator[KwokCluster]:
    """A lab cluster shared by tests that only add objects in namespaces of their own."""
    with KwokCluster.for_lab("gpuop", name="tests-shared") as cluster:
        yield cluster


@pytest.fixture
def fresh_cluster() -> Iterator[KwokCluster]:
    """A lab cluster of this test's own, for tests that change nodes."""
    with KwokCluster.for_lab("gpuop", name="tests-fresh") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def gpuop_cohort(tmp_path_factory) -> CohortRun:
    """The generated gpuop cohort (``cohort_cases.py``), bundled, then batch-graded by ``gpulab grade-batch``.

    Live and from bundles, with the script timeout an instructor may set (GPULAB_SCRIPT_TIMEOUT) at 5 s, not
    the default 20 s: the cohort's checker that hangs (trap check-hangs) waits it out in each of its runs."""
    builder = CohortBuilder(tmp_path_factory.mktemp("cohort"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPULAB_SCRIPT_TIMEOUT", str(COHORT_SCRIPT_TIMEOUT))
        builder.reference_and_variants()
        builder.cluster_states()
        refused = builder.broken_bundles()
        results = builder.base / "results"
        batch = subprocess.run(
            [str(Path(sys.executable).with_name("gpulab")), "grade-batch", str(builder.bundles), "--jobs", "2",
             "--out", str(results), "--seed-secret", str(builder.secret)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
    return CohortRun(builder, refused, results, batch)
