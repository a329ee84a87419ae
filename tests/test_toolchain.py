"""The pinned toolchain: one place for the versions, binaries that tell the truth about theirs."""

import json
import re
import subprocess
from pathlib import Path

from pytest_gpulab.cluster import toolchain


def test_versions_are_read_from_the_pinned_go_modules():
    versions = toolchain.pinned_versions()
    assert (versions.kubernetes, versions.etcd, versions.kwok) == ("1.36.3", "3.6.16", "0.8.0")
    assert toolchain.bin_dir().parent.name.startswith("k8s-1.36.3_etcd-3.6.16_kwok-0.8.0_")


def test_every_staging_module_kubernetes_replaces_is_pinned_to_its_release():
    ours = (toolchain.GOMOD / "kubernetes" / "go.mod").read_text()
    pinned = dict(re.findall(r"^\s*(k8s\.io/[\w-]+) => k8s\.io/[\w-]+ (v\S+)", ours, re.M))
    download = subprocess.run(
        ["go", "mod", "download", "-json", "k8s.io/kubernetes@v1.36.3"],
        env=toolchain.go_environment(),
        cwd=str(toolchain.GOMOD / "kubernetes"),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    upstream = Path(json.loads(download.stdout)["GoMod"]).read_text()
    # Required at v0.0.0 and replaced by ./staging upstream: each needs a published release here.
    required = set(re.findall(r"^\s*(k8s\.io/[\w-]+) v0\.0\.0$", upstream, re.M))
    staging = set(re.findall(r"^\s*(k8s\.io/[\w-]+) => \./staging/", upstream, re.M))
    assert required
    assert required <= staging
    assert set(pinned) == required
    assert all(version.startswith("v0.36.") for version in pinned.values())


def test_binaries_report_the_pinned_versions():
    directory = toolchain.bin_dir()

    def version(*command):
        return subprocess.run(
            [str(directory / command[0]), *command[1:]], capture_output=True, text=True, timeout=30
        ).stdout

    assert version("kube-apiserver", "--version").strip() == "Kubernetes v1.36.3"
    assert version("kube-scheduler", "--version").strip() == "Kubernetes v1.36.3"
    assert version("kube-controller-manager", "--version").strip() == "Kubernetes v1.36.3"
    assert (
        json.loads(version("kubectl", "version", "--client", "-o", "json"))["clientVersion"]["gitVersion"] == "v1.36.3"
    )
    assert "etcd Version: 3.6.16" in version("etcd", "--version")
    assert "0.8.0" in version("kwokctl", "--version")


def test_a_second_build_with_the_cache_present_rebuilds_nothing():
    """A second build with the binaries cached builds nothing: it says so and leaves every binary as it was
    (the same file, not rewritten)."""
    said: list[str] = []
    directory = toolchain.bin_dir()
    before = {path.name: stamp(path) for path in directory.iterdir()}
    assert before
    assert toolchain.build(say=said.append) == directory
    assert said == [f"lab cluster binaries are cached in {directory}"]
    assert {path.name: stamp(path) for path in directory.iterdir()} == before


def stamp(path: Path) -> tuple[int, int, int]:
    """What a rebuilt or rewritten file would not keep: its inode, size and modification time."""
    status = path.stat()
    return status.st_ino, status.st_size, status.st_mtime_ns
