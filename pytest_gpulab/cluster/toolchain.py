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
from collections.abc import Callable, Iterable
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
# The real node's (``gpulab build --node``, ``gpulab node up``): built only when asked, into a folder of their own,
# so that the grader's image and a lab cluster's cache hold none of them.
NODE_COMPONENTS = {
    "kubernetes": {"kubelet": "k8s.io/kubernetes/cmd/kubelet"},
    "containerd": {
        "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
        "containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
    },
    "runc": {"runc": "github.com/opencontainers/runc"},
}
NODE_BINARIES = tuple(name for binaries in NODE_COMPONENTS.values() for name in binaries)
# runc's seccomp support is cgo over libseccomp (Debian's libseccomp-dev); every other binary is static, cgo off.
_CGO_TAGS = {"runc": "seccomp"}

_PINNED_MODULE = {
    "kwok": "sigs.k8s.io/kwok",
    "etcd": "go.etcd.io/etcd/server/v3",
    "kubernetes": "k8s.io/kubernetes",
    "containerd": "github.com/containerd/containerd/v2",
    "runc": "github.com/opencontainers/runc",
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


def _pinned(folder: str) -> str:
    return _required_version((GOMOD / folder / "go.mod").read_text(), _PINNED_MODULE[folder])


def pinned_versions() -> Versions:
    return Versions(**{folder: _pinned(folder) for folder in COMPONENTS})


def _pins_digest(folders: Iterable[str] = COMPONENTS) -> str:
    digest = hashlib.sha256()
    for folder in sorted(folders):
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


def node_bin_dir() -> Path:
    """Where the real node's binaries for the current pins are (or will be) cached."""
    label = "_".join(f"{folder.replace('kubernetes', 'k8s')}-{_pinned(folder)}" for folder in NODE_COMPONENTS)
    return cache_root() / f"node_{label}_{_pins_digest(NODE_COMPONENTS)}" / "bin"


def missing_binaries(directory: Path | None = None, names: Iterable[str] = BINARIES) -> list[str]:
    directory = directory or bin_dir()
    return [name for name in names if not os.access(directory / name, os.X_OK)]


def _ldflags(folder: str, versions: Versions) -> str:
    flags = ["-s", "-w"]
    if folder == "containerd":
        flags.append(f"-X github.com/containerd/containerd/v2/version.Version=v{_pinned(folder)}")
    elif folder == "runc":
        flags.append(f"-X main.version={_pinned(folder)}")
    elif folder == "kubernetes":
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


def go_environment(cgo: bool = False) -> dict[str, str]:
    """The caller's environment with the settings every build here needs."""
    env = dict(os.environ)
    # go.sum pins every checksum and -mod=readonly refuses to add one, so the
    # checksum database (not reachable from every machine) is never needed.
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="1" if cgo else "0", GOSUMDB="off")
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    return env


def _module_copy(folder: str, work: Path) -> Path:
    for entry in (GOMOD / folder).iterdir():
        (work / entry.name).write_bytes(entry.read_bytes())
    return work


def _build_pause(out_dir: Path, say: Callable[[str], None]) -> None:
    """Kubernetes' own pause (``build/pause/linux/pause.c`` of the pinned module), static, for the real node's
    sandbox image: no registry holds one for us."""
    with tempfile.TemporaryDirectory(prefix="gpulab-pause-") as work:
        found = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
                               cwd=_module_copy("kubernetes", Path(work)), env=go_environment(),
                               capture_output=True, text=True)  # fmt: skip
    source = Path(found.stdout.strip()) / "build" / "pause" / "linux" / "pause.c"
    if found.returncode != 0 or not source.is_file():
        raise ToolchainError(f"pause.c is not in the pinned k8s.io/kubernetes module: {found.stderr.strip()}")
    command = ["gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.10.2-gpulab", "-o", str(out_dir / "pause")]
    compiled = subprocess.run([*command, str(source)], capture_output=True, text=True)
    if compiled.returncode != 0:
        raise ToolchainError(f"gcc could not build the node's pause (needs gcc and libc6-dev): {compiled.stderr}")
    say(f"  pause: built from {source}")


def _build_component(
    folder: str, binaries: dict[str, str], out_dir: Path, versions: Versions, say: Callable[[str], None]
) -> None:
    with tempfile.TemporaryDirectory(prefix=f"gpulab-{folder}-") as work:
        module_dir = _module_copy(folder, Path(work))
        staging = out_dir.parent / f".{folder}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        command = ["go", "build", "-v", "-trimpath", "-ldflags", _ldflags(folder, versions)]
        if folder in _CGO_TAGS:
            command += ["-tags", _CGO_TAGS[folder]]
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
            env=go_environment(cgo=folder in _CGO_TAGS),
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


def build(say: Callable[[str], None] = lambda message: print(message, flush=True), *, node: bool = False) -> Path:
    """Build whatever binary is missing for the current pins; return their directory. With ``node``, the real
    node's binaries too (``node_bin_dir()``)."""
    if shutil.which("go") is None:
        raise ToolchainError("Go is not on PATH; install Go 1.26 or later, then run `gpulab build` again.")
    out_dir = _build_set(COMPONENTS, bin_dir(), "lab cluster", say)
    if node:
        if shutil.which("pkg-config") is None or subprocess.run(["pkg-config", "--exists", "libseccomp"]).returncode:
            raise ToolchainError("runc needs libseccomp's headers: install libseccomp-dev and pkg-config (Debian)")
        node_dir = _build_set(NODE_COMPONENTS, node_bin_dir(), "real node", say)
        if not os.access(node_dir / "pause", os.X_OK):
            _build_pause(node_dir, say)
    return out_dir


def _build_set(components: dict[str, dict[str, str]], out_dir: Path, what: str, say: Callable[[str], None]) -> Path:
    names = [name for binaries in components.values() for name in binaries]
    if not missing_binaries(out_dir, names):
        say(f"{what} binaries are cached in {out_dir}")
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(out_dir.parent / ".build.lock", "w") as lock:
        # Two setups at once (two checkouts, a CI run) would race on the same cache.
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = set(missing_binaries(out_dir, names))
        if missing:
            say(f"building the {what} binaries into {out_dir} (a cold build takes a while)")
            started = time.monotonic()
            for folder, binaries in components.items():
                if missing & set(binaries):
                    _build_component(folder, binaries, out_dir, pinned_versions(), say)
            say(f"{what} binaries built in {time.monotonic() - started:.0f}s")
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
