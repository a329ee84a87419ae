"""The cross-learner case, inside a real ``gpulab grade-batch --jobs 2``: an attacking bundle and a victim
bundle are graded side by side, and the victim's verdicts equal its verdicts when graded alone.

The attacker is gpurt's reference with its crosscheck (``bin/rc-crosscheck.sh``, which step 6 runs against
the cluster) replaced by a scan of every loopback port that writes into every etcd it finds. Beside the
batch runs a canary lab cluster, so that a foreign etcd surely listens on loopback while the attack runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cohort_cases import verdicts
from grading import solve
from hostile_scripts import ETCD_ATTACK, PWNED, etcd_keys, objects_of

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import write_bundle
from pytest_gpulab.cohort.regrade import grade_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.sandbox import confine as sandbox
from pytest_gpulab.selftest.variants import copy_root

LAB = "gpurt"
CROSSCHECK = "bin/rc-crosscheck.sh"
pytestmark = pytest.mark.skipif(not sandbox.probe().namespaces, reason="no sandbox on this machine")


def bundles_of_attacker_and_victim(base: Path) -> Path:
    folder = base / "bundles"
    folder.mkdir()
    victim = base / "victim"
    victim.mkdir()
    with KwokCluster.for_lab(LAB, name="tests-victim") as cluster:
        solve(LAB, cluster, victim)
        attacker = copy_root(victim, base / "attacker")
        (attacker / CROSSCHECK).write_text(ETCD_ATTACK)
        for learner, root in (("a-attacker", attacker), ("b-victim", victim)):
            write_bundle(discover().get(LAB), root, cluster, folder / f"{learner}.gpulab.tar.gz", learner=learner)
    return folder


def report_of(folder: Path) -> dict:
    return json.loads((folder / "report.json").read_text())


def scans_in(step: dict) -> list[dict]:
    """What each run of the attack printed (its instructor detail keeps the script's output)."""
    found = []
    for check in step["checks"]:
        for line in str((check.get("detail") or {}).get("stdout", "")).splitlines():
            if line.startswith('{"open"'):
                found.append(json.loads(line))
    return found


def test_an_attacker_graded_beside_its_victim_changes_nothing_of_it(tmp_path, gpuop_cluster):
    folder = bundles_of_attacker_and_victim(tmp_path)
    alone = grade_bundle(folder / "b-victim.gpulab.tar.gz", tmp_path / "alone")
    assert alone.status == "graded", alone.reason
    assert etcd_keys(gpuop_cluster) == []
    assert PWNED not in json.dumps(objects_of(gpuop_cluster))
    batch = subprocess.run(
        [str(Path(sys.executable).with_name("gpulab")), "grade-batch", str(folder), "--jobs", "2",
         "--out", str(tmp_path / "results")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert batch.returncode in (0, 1), batch.stdout[-2000:] + batch.stderr[-2000:]
    victim = report_of(tmp_path / "results" / "b-victim")
    assert verdicts(victim) == verdicts(report_of(tmp_path / "alone"))
    assert victim["earned"] == victim["possible"]
    attacker = report_of(tmp_path / "results" / "a-attacker")
    crosscheck = next(step for step in attacker["steps"] if step["number"] == 6)
    assert crosscheck["outcome"] == "failed", crosscheck
    scans = scans_in(crosscheck)
    assert scans, "the attack's runs report what they reached"
    # Each run reaches its own forwarder's port at most (none in a run given an unreachable API server).
    assert all(
        scan["open"] in ([8001], []) and scan["etcd"] == scan["written"] == scan["created"] == [] for scan in scans
    )
    assert any(scan["open"] == [8001] for scan in scans), scans
    # The canary is the shared cluster: what the attack would have written there is a key and a namespace.
    assert etcd_keys(gpuop_cluster) == []
    assert PWNED not in json.dumps(objects_of(gpuop_cluster))
