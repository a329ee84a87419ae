"""A generated cohort of gpuop submissions: the reference, forms, every trap that only edits files (of
graders/gpuop/variants.toml) and two cluster states, each a lab root bundled with its own cluster's snapshot
and graded live; plus two bundles that must be refused."""

from __future__ import annotations

import gzip
import io
import json
import re
import secrets
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuop_states import make_steps_6_and_8_mistakes, solve

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import MANIFEST, ROOT, manifest_checksum, sha256_file, write_bundle
from pytest_gpulab.cohort.regrade import keyed_seed
from pytest_gpulab.labs import discover
from pytest_gpulab.selftest.variants import FORM, copy_root, load_variants

LAB = "gpuop"
VARIANTS = Path(__file__).resolve().parent.parent / "graders" / LAB  # the checkout's variants.toml
ALL_STEPS = frozenset(range(1, 9))


@dataclass
class Submission:
    learner: str
    failing: frozenset[int]  # the steps the variant fails
    live: dict[int, Any] = field(default_factory=dict)  # the live grading's verdicts, step by step


# Where `gpulab grade` unpacks a bundle's lab root.
BUNDLED_ROOT = re.compile(r"/tmp/gpulab-grade-[^/\s]+/bundle/root")


def verdicts(report: dict[str, Any], root: Path | None = None) -> dict[int, Any]:
    """Each step's outcome and each check's id, outcome and learner text (the lab root's path left out)."""

    def text(value: Any) -> str:
        value = str(value).replace(str(root), "ROOT") if root else str(value)
        return BUNDLED_ROOT.sub("ROOT", value)

    return {
        step["number"]: (step["outcome"], [(c["id"], c["outcome"], text(c.get("message")), text(c.get("hint")))
                                           for c in step["checks"]])
        for step in report["steps"]
    }  # fmt: skip


def grade_live(root: Path, cluster: KwokCluster, seed: int, scratch: Path) -> dict[int, Any]:
    """``pytest --lab`` on the learner's own cluster, as on their machine."""
    report = scratch / "live-report.json"
    subprocess.run(
        [sys.executable, "-m", "pytest", f"--lab={LAB}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
         f"--lab-seed={seed}", f"--gpulab-report={report}", "-p", "no:cacheprovider", "-q"],
        cwd=scratch, env=cluster.environment(), stdin=subprocess.DEVNULL, capture_output=True, timeout=600,
    )  # fmt: skip
    return verdicts(json.loads(report.read_text()), root)


class CohortBuilder:
    """Bundles into ``bundles``, with each submission's live verdicts."""

    def __init__(self, base: Path) -> None:
        self.base, self.bundles = base, base / "bundles"
        self.bundles.mkdir(parents=True)
        self.secret = base / "seed-secret"  # the instructor's, which the batch keys its seeds with
        self.secret.write_text(secrets.token_hex(32))
        self.lab = discover().get(LAB)
        self.submissions: dict[str, Submission] = {}

    def add(self, learner: str, root: Path, cluster: KwokCluster, failing: frozenset[int]) -> None:
        write_bundle(self.lab, root, cluster, self.bundles / f"{learner}.gpulab.tar.gz", learner=learner)
        scratch = self.base / "scratch" / learner
        scratch.mkdir(parents=True)
        bundle = self.bundles / f"{learner}.gpulab.tar.gz"
        seed = keyed_seed(self.secret.read_bytes().strip(), sha256_file(bundle))  # the seed `gpulab grade` keys
        self.submissions[learner] = Submission(learner, failing, grade_live(root, cluster, seed, scratch))

    def reference_and_variants(self, forms: int = 5) -> None:
        root = self.base / "reference-root"
        root.mkdir()
        with KwokCluster.for_lab(LAB, name="cohort-reference") as cluster:
            solve(cluster, root)
            self.add("reference", root, cluster, frozenset())
            variants = [variant for variant in load_variants(VARIANTS) if not variant.own_cluster]
            chosen = [variant for variant in variants if variant.kind == FORM][:forms]
            for variant in chosen + [variant for variant in variants if variant.kind != FORM]:
                variant_root = copy_root(root, self.base / "roots" / variant.name)
                variant.apply_edits(variant_root)
                step = variant.step
                self.add(f"{variant.kind}-{variant.name}", variant_root, cluster, frozenset({step} if step else ()))

    def cluster_states(self) -> None:
        for learner, failing in (("state-untouched", ALL_STEPS), ("state-mistakes-6-8", frozenset({6, 8}))):
            root = self.base / "roots" / learner
            root.mkdir(parents=True)
            with KwokCluster.for_lab(LAB, name=f"cohort-{learner}") as cluster:
                if failing != ALL_STEPS:
                    make_steps_6_and_8_mistakes(cluster, root)
                self.add(learner, root, cluster, failing)

    def broken_bundles(self) -> dict[str, str]:
        """Two bundles that must be refused, each with a fragment of its reason."""
        whole = (self.bundles / "reference.gpulab.tar.gz").read_bytes()
        (self.bundles / "broken-truncated.gpulab.tar.gz").write_bytes(whole[: len(whole) // 2])
        (self.bundles / "broken-traversal.gpulab.tar.gz").write_bytes(traversing_bundle(whole))
        return {"broken-truncated": "cannot be read", "broken-traversal": "outside its lab root"}


@dataclass
class CohortRun:
    builder: CohortBuilder
    refused: dict[str, str]  # learner: a fragment of the reason
    results: Path
    batch: subprocess.CompletedProcess[str]


def traversing_bundle(honest: bytes) -> bytes:
    """The honest bundle with one more file, ``root/../../escaped``, listed in a manifest with a right checksum."""
    with tarfile.open(fileobj=io.BytesIO(honest), mode="r:gz") as archive:
        members = [(member, archive.extractfile(member).read()) for member in archive]  # type: ignore[union-attr]
    manifest = json.loads(members[0][1])
    manifest["files"].append({"path": "../../escaped", "bytes": 3, "sha256": "0" * 64, "executable": False})
    manifest["checksum"] = manifest_checksum(manifest)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb") as compressed, tarfile.open(fileobj=compressed, mode="w") as archive:
        for name, data in [(MANIFEST, json.dumps(manifest).encode()), *((m.name, d) for m, d in members[1:]),
                           (ROOT + "../../escaped", b"hi\n")]:  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()
