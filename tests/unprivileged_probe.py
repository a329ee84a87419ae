"""Run inside an unprivileged container by ``test_unprivileged_grader.py``: a grader that is not root starts
a lab cluster, then runs hostile scripts in the sandbox it can make; prints what happened as JSON.

Usage (in the container): ``python3 unprivileged_probe.py``; the package and its dependencies on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from hostile_scripts import ETCD_ATTACK

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox import confine as sandbox

CASES = {
    "whoami": "#!/bin/sh\nid -u\n",
    "read-and-write-the-cluster": "#!/bin/sh\nkubectl get nodes -o name\nkubectl delete node lab-node-0\n",
    "scan-and-write-etcd": ETCD_ATTACK,
    "write-outside": "#!/bin/sh\ntouch {lab}/out/x {package}/x /x 2>/dev/null; echo done\n",
    "environment": "#!/bin/sh\nenv\ncat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'\n",
}


def fingerprint(*roots: Path) -> str:
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()


def main() -> None:
    probe = sandbox.probe()
    lab = Path("/tmp/lab")
    (lab / "bin").mkdir(parents=True)
    (lab / "out").mkdir()
    package = Path(sandbox.__file__).parent
    for name, text in CASES.items():
        script = lab / "bin" / name
        script.write_text(text.format(lab=lab, package=package) if "{lab}" in text else text)
        script.chmod(0o755)
    os.environ["GPULAB_PROBE_SECRET"] = "probe-secret-2f9c"
    before = fingerprint(lab, package)
    found: dict[str, object] = {"uid": os.getuid(), "mode": probe.mode, "describe": probe.describe()}
    with KwokCluster.for_lab("gpuop", name="unprivileged") as cluster:
        runner = ScriptRunner(Path("/tmp/work"), 30, lambda: str(cluster.kubeconfig), lab_root=lab, sandbox=probe)
        for name in CASES:
            result = runner.run(lab / "bin" / name, cluster=True).result
            found[name] = {"exit": result.exit_code, "stdout": result.stdout, "stderr": result.stderr[-2000:]}
        found["refused"] = runner.cluster_view().refused
        runner.close()
        found["nodes"] = cluster.kubectl("get", "nodes", "-o", "name").stdout.split()
    found["unchanged"] = fingerprint(lab, package) == before
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    main()
