"""For ``test_container_job.py``: the Job's Pod spelled as a podman command, and a small gpuop cohort.

``pod_command`` reads the manifest ``gpulab job-manifest`` wrote and turns every field of its Pod into
podman's words, refusing a field it does not know: a change to the manifest must change this too.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from cohort_cases import verdicts
from gpuop_states import solve

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import MANIFEST, manifest_checksum, write_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.selftest.variants import FORM, copy_root, load_variants

CHECKOUT = Path(__file__).resolve().parents[1]
PODMAN = ["podman", "run", "--rm", "--runtime=runc", "--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"]
# hostUsers: false, as podman makes it: the container's ids 0..65535 are the host's 200000..265535.
ID_MAP = 200000
# containers-common's profile, podman's default: CRI-O's RuntimeDefault.
RUNTIME_DEFAULT = "/usr/share/containers/seccomp.json"
KNOWN_CONTAINER = {"privileged", "allowPrivilegeEscalation", "capabilities", "readOnlyRootFilesystem", "procMount"}
KNOWN_POD = {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "seccompProfile"}


def _security(pod: dict[str, Any], container: dict[str, Any]) -> list[str]:
    ours, theirs = pod["securityContext"], container["securityContext"]
    assert set(ours) <= KNOWN_POD and set(theirs) <= KNOWN_CONTAINER, (ours, theirs)
    assert ours["runAsNonRoot"]
    assert ours["runAsUser"] != 0
    assert theirs["privileged"] is False
    assert ours["seccompProfile"] == {"type": "RuntimeDefault"}, "a Localhost profile is for the nodes"
    flags = [f"--user={ours['runAsUser']}:{ours['runAsGroup']}", f"--security-opt=seccomp={RUNTIME_DEFAULT}"]
    flags += [f"--cap-drop={capability}" for capability in theirs["capabilities"]["drop"]]
    if theirs["allowPrivilegeEscalation"] is False:
        flags.append("--security-opt=no-new-privileges")
    if theirs["readOnlyRootFilesystem"]:
        flags += ["--read-only", "--read-only-tmpfs=false"]  # podman's own writable /run and /var/tmp: not asked
    if theirs.get("procMount") == "Unmasked":
        flags.append("--security-opt=unmask=ALL")
    if pod["hostUsers"] is False:
        flags += [f"--uidmap=0:{ID_MAP}:65536", f"--gidmap=0:{ID_MAP}:65536"]
    return flags


def _mounts(pod: dict[str, Any], container: dict[str, Any], volume: Path) -> list[str]:
    kinds = {entry["name"]: entry for entry in pod["volumes"]}
    flags = []
    for mount in container["volumeMounts"]:
        source = kinds[mount["name"]]
        if "persistentVolumeClaim" in source:
            flags.append(f"--volume={volume}:{mount['mountPath']}")
        else:
            assert source == {"name": mount["name"], "emptyDir": {}}, source
            flags.append(f"--tmpfs={mount['mountPath']}:rw,exec,nosuid,nodev,mode=1777")  # an emptyDir: exec
    return flags


def pod_command(manifest: dict[str, Any], volume: Path, index: int, name: str) -> list[str]:
    """The podman command that runs completion index ``index`` of the Job as its Pod would run."""
    pod = manifest["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    memory = container["resources"]["limits"]["memory"].removesuffix("i").lower()
    return [
        *PODMAN, f"--name={name}", f"--memory={memory}", *_security(pod, container), *_mounts(pod, container, volume),
        f"--env=JOB_COMPLETION_INDEX={index}", f"--entrypoint={container['command'][0]}", container["image"],
        *container["command"][1:],
    ]  # fmt: skip


def shared_volume(volume: Path, bundles: Path, manifest: dict[str, Any]) -> None:
    """The claim's volume as the Pods find it: bundles/ to read, results/ to write, for the Pod's group
    (fsGroup) as the host sees it through the user namespace."""
    group = ID_MAP + manifest["spec"]["template"]["spec"]["securityContext"]["fsGroup"]
    (volume / "bundles").mkdir(parents=True)
    (volume / "results").mkdir()
    for bundle in sorted(bundles.iterdir()):
        (volume / "bundles" / bundle.name).write_bytes(bundle.read_bytes())
    for path in [volume, *volume.rglob("*")]:
        path.chmod(0o2775 if path.is_dir() else 0o664)
        os.chown(path, -1, group)


def rewritten(honest: bytes, **changes: Any) -> bytes:
    """The honest bundle with its manifest changed, and its checksum made right again."""
    with tarfile.open(fileobj=io.BytesIO(honest), mode="r:gz") as archive:
        members = [(member, archive.extractfile(member).read()) for member in archive]  # type: ignore[union-attr]
    manifest = {**json.loads(members[0][1]), **changes}
    manifest["checksum"] = manifest_checksum(manifest)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb") as compressed, tarfile.open(fileobj=compressed, mode="w") as archive:
        for name, data in [(MANIFEST, json.dumps(manifest).encode()), *((m.name, d) for m, d in members[1:])]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def build_image(image: str) -> str:
    """The grader's image built from these sources (scripts/image-build), or the one already built from them."""
    built = subprocess.run(["bash", str(CHECKOUT / "scripts" / "image-build"), image], env={**os.environ,
                           "PYTHON": sys.executable}, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=1800)  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    print(built.stdout.strip())
    return image


def outcome(results: Path, learner: str) -> dict[str, Any]:
    return json.loads((results / learner / "outcome.json").read_text())


def same_as_host(pod_results: Path, host_results: Path, learners: list[str]) -> dict[str, tuple[str, int, int]]:
    """Assert that each learner's outcome, and each check with its learner text, equals the host's; return
    each learner's (status, earned, possible)."""
    statuses = {}
    for learner in learners:
        ours, theirs = outcome(pod_results, learner), outcome(host_results, learner)
        fields = ("status", "earned", "possible", "reason", "lab", "seed", "rubric_graded")
        assert {f: ours[f] for f in fields} == {f: theirs[f] for f in fields}, learner
        statuses[learner] = (ours["status"], ours["earned"], ours["possible"])
        if ours["status"] == "graded":
            report = json.loads((pod_results / learner / "report.json").read_text())
            host_report = json.loads((host_results / learner / "report.json").read_text())
            assert verdicts(report) == verdicts(host_report), learner
            assert "reduced" not in report["sandbox"], report["sandbox"]
            print(f"{learner}: in a Pod {ours['seconds']['total']:.1f}s, on the host {theirs['seconds']['total']:.1f}s; "
                  f"sandbox in the Pod: {report['sandbox']}")  # fmt: skip
    return statuses


def small_cohort(base: Path) -> Path:
    """Two right answers (the reference, a form), a trap and two refused bundles: one truncated, one whose
    manifest gives the tools' versions as a list (once graded as an `error`: a grader bug, now fixed)."""
    bundles, lab = base / "bundles", discover().get("gpuop")
    bundles.mkdir(parents=True)
    root = base / "reference-root"
    root.mkdir()
    variants = {variant.name: variant for variant in load_variants(lab.folder)}
    form = next(variant for variant in variants.values() if variant.kind == FORM)
    with KwokCluster.for_lab("gpuop", name="container-cohort") as cluster:
        solve(cluster, root)
        write_bundle(lab, root, cluster, bundles / "reference.gpulab.tar.gz", learner="reference")
        for learner, variant in ((f"form-{form.name}", form), ("trap-version-string", variants["version-string"])):
            variant_root = copy_root(root, base / "roots" / learner)
            variant.apply_edits(variant_root)
            write_bundle(lab, variant_root, cluster, bundles / f"{learner}.gpulab.tar.gz", learner=learner)
    whole = (bundles / "reference.gpulab.tar.gz").read_bytes()
    (bundles / "broken-truncated.gpulab.tar.gz").write_bytes(whole[: len(whole) // 2])
    # No bundle makes an honest grading `error`: whatever a bundle holds is graded or refused, and an error is
    # the grader's or the machine's (a cluster that does not start, a timeout), the same on host and in a Pod.
    (bundles / "broken-tools-a-list.gpulab.tar.gz").write_bytes(rewritten(whole, tools=["kubernetes"]))
    return bundles
