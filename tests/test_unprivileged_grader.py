"""A grader that is not root, in a container with the Job's security context, still sandboxes every script.

The container is the one ``gpulab job-manifest`` asks Kubernetes for, as podman spells it: uid 1000, no
capability, no privilege escalation, a read-only image, an ID-mapped user namespace and an unmasked /proc.
In it the installed package starts a real lab cluster and runs hostile scripts (``unprivileged_probe.py``);
bubblewrap makes their sandbox through a user namespace. The base image is Debian's, made by
``scripts/base-image`` (mmdebstrap, no registry); the test skips where podman or that image is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpulab.cluster import toolchain

CHECKOUT = Path(__file__).resolve().parents[1]
IMAGE = "localhost/gpulab-base:bookworm"
# The Job's securityContext (pytest_gpulab.cohort.jobs), in podman's words.
JOB_CONTEXT = [
    "--user=1000:1000", "--cap-drop=all", "--security-opt=no-new-privileges", "--read-only",
    "--uidmap=0:200000:65536", "--gidmap=0:200000:65536", "--security-opt=unmask=ALL",
]  # fmt: skip
PODMAN = ["podman", "run", "--rm", "--runtime=runc", "--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"]


def _image_missing() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/setup installs it as root)"
    done = subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True, timeout=60)
    return None if done.returncode == 0 else f"no image {IMAGE} (scripts/base-image makes it)"


pytestmark = pytest.mark.skipif(bool(reason := _image_missing()), reason=str(reason))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package as a wheel installs it (its labs and the fake containerd inside), without dependencies."""
    target = tmp_path_factory.mktemp("installed")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(CHECKOUT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    target.chmod(0o755)
    return target


def test_a_grader_without_privilege_sandboxes_every_script(installed):
    dependencies = Path(next(p for p in sys.path if p.endswith("site-packages")))
    mounts = [
        f"--volume={installed}:/pkg:ro", f"--volume={dependencies}:/deps:ro",
        f"--volume={CHECKOUT / 'tests'}:/tests:ro", f"--volume={toolchain.bin_dir()}:/gpulab-bin:ro",
    ]  # fmt: skip
    env = ["--env=PYTHONPATH=/pkg:/tests:/deps", "--env=GPULAB_BIN_DIR=/gpulab-bin", "--env=HOME=/tmp"]
    done = subprocess.run(
        [*PODMAN, *JOB_CONTEXT, *mounts, *env, IMAGE, "python3", "/tests/unprivileged_probe.py"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["uid"] == 1000 and found["mode"] == "userns", found["describe"]
    assert "reduced" not in found["describe"]
    assert found["whoami"]["stdout"] == "65534\n"
    cluster = found["read-and-write-the-cluster"]
    assert "node/lab-node-0" in cluster["stdout"] and "read-only" in cluster["stderr"], cluster
    assert found["refused"]
    assert "node/lab-node-0" in found["nodes"]
    scan = json.loads(found["scan-and-write-etcd"]["stdout"])
    assert scan == {"open": [8001], "etcd": [], "written": [], "created": []}, scan
    assert found["unchanged"] is True
    assert found["write-outside"]["stdout"] == "done\n"
    assert "probe-secret" not in found["environment"]["stdout"]
