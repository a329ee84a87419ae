"""Build the lab cluster's binaries from Go modules, offline, with the local Go.

The pins live in one place: the go.mod/go.sum files under ``gomod/``. The
binaries are cached outside the checkout, in a directory named after the
pinned versions and a digest of those files, so changing a pin rebuilds and an
unchanged pin costs nothing.

Usable without pytest: ``python -m pytest_gpulab.cluster.toolchain`` (or
``gpulab build``) builds, ``bin_dir()`` tells where the binaries are.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

GOMOD = resources.files("pytest_gpulab.cluster") / "gomod"

# Binary names kwokctl and the plugin look for, by Go module folder.
COMPONENTS = {
    "kwok": {
        "kwok": "sigs.k8s.io/kwok/cmd/kwok",
        "kwokctl": "sigs.k8s.io/kwok/cmd/kwokctl",
    },
    # etcdctl and etcdutl save and restore a cluster's snapshot (kwokctl snapshot, bundles).
    "etcd": {"etcd": ".", "etcdctl": "go.etcd.io/etcd/etcdctl/v3", "etcdutl": "go.etcd.io/etcd/etcdutl/v3"},
    "kubernetes": {
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    },
}
BINARIES = tuple(name for binaries in COMPONENTS.values() for name in binaries)

_PINNED_MODULE = {
    "kwok": "sigs.k8s.io/kwok",
    "etcd": "go.etcd.io/etcd/server/v3",
    "kubernetes": "k8s.io/kubernetes",
}


class ToolchainError(RuntimeError):
    """The binaries could not be built or are not there."""


@dataclass(frozen=True)
class Versions:
    kubernetes: str  # "1.36.3", no leading v
    etcd: str
    kwok: str

    @property
    def label(self) -> str:
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}"


def _required_version(go_mod: str, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+v(\S+)", go_mod, re.M)
    if not match:
        raise ToolchainError(f"{module} is not required in the pinned go.mod")
    return match.group(1)


def pinned_versions() -> Versions:
    return Versions(
        **{
            folder: _required_version((GOMOD / folder / "go.mod").read_text(), module)
            for folder, module in _PINNED_MODULE.items()
        }
    )


def _pins_digest() -> str:
    digest = hashlib.sha256()
    for folder in sorted(COMPONENTS):
        for name in ("go.mod", "go.sum", "main.go"):
            source = GOMOD / folder / name
            if source.is_file():
                digest.update(f"{folder}/{name}\0".encode())
                digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    """``$GPULAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-gpulab``, else ``~/.cache/pytest-gpulab``."""
    if explicit := os.environ.get("GPULAB_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-gpulab"


def bin_dir() -> Path:
    """Where the binaries for the current pins are (or will be) cached."""
    if explicit := os.environ.get("GPULAB_BIN_DIR"):
        return Path(explicit)
    return cache_root() / f"{pinned_versions().label}_{_pins_digest()}" / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    directory = directory or bin_dir()
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def _ldflags(folder: str, versions: Versions) -> str:
    flags = ["-s", "-w"]
    if folder == "kubernetes":
        major, minor, _ = versions.kubernetes.split(".")
        build_date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [
                f"-X {package}.gitVersion=v{versions.kubernetes}",
                f"-X {package}.gitMajor={major}",
                f"-X {package}.gitMinor={minor}",
                f"-X {package}.gitTreeState=clean",
                f"-X {package}.buildDate={build_date}",
            ]
    elif folder == "kwok":
        flags += [
            f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions.kwok}",
            f"-X sigs.k8s.io/kwok/pkg/consts.KubeVersion={versions.kubernetes}",
        ]
    return " ".join(flags)


def go_environment() -> dict[str, str]:
    """The caller's environment with the settings every build here needs."""
    env = dict(os.environ)
    # go.sum pins every checksum and -mod=readonly refuses to add one, so the
    # checksum database (not reachable from every machine) is never needed.
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOSUMDB="off")
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    return env


def _build_component(folder: str, out_dir: Path, versions: Versions, say: Callable[[str], None]) -> None:
    binaries = COMPONENTS[folder]
    with tempfile.TemporaryDirectory(prefix=f"gpulab-{folder}-") as work:
        module_dir = Path(work)
        for entry in (GOMOD / folder).iterdir():
            (module_dir / entry.name).write_bytes(entry.read_bytes())
        staging = out_dir.parent / f".{folder}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        command = ["go", "build", "-v", "-trimpath", "-ldflags", _ldflags(folder, versions)]
        if len(binaries) == 1:
            ((name, package),) = binaries.items()
            command += ["-o", str(staging / name), package]
        else:
            command += ["-o", str(staging) + os.sep, *binaries.values()]
        started = time.monotonic()
        say(f"building {', '.join(binaries)} ({folder} module)")
        process = subprocess.Popen(
            command,
            cwd=module_dir,
            env=go_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        tail: list[str] = []
        last_report = started
        assert process.stdout is not None
        for compiled, line in enumerate(process.stdout, start=1):
            tail = [*tail, line.rstrip()][-40:]
            if time.monotonic() - last_report >= 30:
                last_report = time.monotonic()
                say(f"  {folder}: {compiled} packages so far, {last_report - started:.0f}s")
        if process.wait() != 0:
            raise ToolchainError(
                f"go build of the {folder} module failed (exit {process.returncode}); last output:\n" + "\n".join(tail)
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in binaries:
            os.replace(staging / name, out_dir / name)
        staging.rmdir()
        say(f"  {folder}: done in {time.monotonic() - started:.0f}s")


def build(say: Callable[[str], None] = lambda message: print(message, flush=True)) -> Path:
    """Build whatever binary is missing for the current pins; return their directory."""
    if shutil.which("go") is None:
        raise ToolchainError("Go is not on PATH; install Go 1.26 or later, then run `gpulab build` again.")
    out_dir = bin_dir()
    versions = pinned_versions()
    missing = set(missing_binaries(out_dir))
    if not missing:
        say(f"lab cluster binaries are cached in {out_dir}")
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.parent / ".build.lock", "w") as lock:
        # Two setups at once (two checkouts, a CI run) would race on the same cache.
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = set(missing_binaries(out_dir))
        if missing:
            say(f"building {versions.label} into {out_dir} (a cold build takes a while)")
            started = time.monotonic()
            for folder, binaries in COMPONENTS.items():
                if missing & set(binaries):
                    _build_component(folder, out_dir, versions, say)
            say(f"all binaries built in {time.monotonic() - started:.0f}s")
    return out_dir


def main() -> int:
    try:
        print(build())
    except ToolchainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


def up_workdir(lab: str) -> Path:
    """Where ``gpulab up LAB`` keeps the lab's cluster (kwokctl's work directory): it outlives the command."""
    return cache_root() / "clusters" / lab


def up_kubeconfig(lab: str) -> Path:
    """The kubeconfig of the cluster ``gpulab up LAB`` started (``KwokCluster.for_lab``'s default name)."""
    return up_workdir(lab) / "clusters" / f"gpulab-{lab}" / "kubeconfig.yaml"
