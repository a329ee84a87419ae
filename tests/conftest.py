"""Shared fixtures for the plugin's own tests: real lab clusters, never mocks."""

from collections.abc import Iterator

import pytest

from pytest_gpulab import toolchain
from pytest_gpulab.kwok import KwokCluster


@pytest.fixture(scope="session", autouse=True)
def pinned_binaries() -> Iterator[None]:
    """Name the binaries' directory explicitly: pytester moves HOME, and the cache lives under it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPULAB_BIN_DIR", str(toolchain.bin_dir()))
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
