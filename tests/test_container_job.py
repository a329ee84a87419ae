"""The grader's image, built here and run as the Indexed Job's Pods; and Gradescope's package in a container.

``scripts/image-build`` builds the image (``Containerfile``) over the Debian base ``scripts/base-image``
makes, with this machine's binaries: no registry. A small gpuop cohort (two right answers, a trap and two
refused bundles) is graded twice: by ``gpulab grade-batch`` on the host, and by the image run with podman
once per completion index, two at a time, each as the manifest ``gpulab job-manifest`` writes asks
(``container_kit.pod_command``). The verdicts must be equal, step by step, and so must the cohort report.
Then the Gradescope package is unpacked and set up in a fresh container of the Debian base, and grades a
right bundle (full marks, without a sandbox there) and a trap. Skipped where podman, runc, the base or the
wheelhouse is missing; slow (the image's build, then a dozen lab clusters).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from cohort_cases import BUNDLED_ROOT
from container_kit import PODMAN, build_image, outcome, pod_command, same_as_host, shared_volume, small_cohort

from pytest_gpulab.cluster import toolchain
from pytest_gpulab.cohort.regrade import SECRET_FILE

CHECKOUT = Path(__file__).resolve().parents[1]
GPULAB = str(Path(sys.executable).with_name("gpulab"))
BASE = "localhost/gpulab-base:bookworm"
IMAGE = "localhost/pytest-gpulab:dev"
WHEELHOUSE = toolchain.cache_root() / "wheelhouse"
PREFIX = f"gpulab-test-{os.getpid()}"  # every container this module starts


def _cannot_run() -> str | None:
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup installs podman, runc and mmdebstrap as root)"
    if subprocess.run(["podman", "image", "exists", BASE], capture_output=True, timeout=60).returncode != 0:
        return f"no image {BASE} (scripts/base-image makes it)"
    if not WHEELHOUSE.is_dir():
        return f"no wheelhouse at {WHEELHOUSE} (scripts/setup fills it)"
    return None


pytestmark = [pytest.mark.skipif(bool(reason := _cannot_run()), reason=str(reason)), pytest.mark.timeout(3600)]


def run(command: list[str], timeout: float = 900, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env={**os.environ, **env}, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def remove_containers(prefix: str = PREFIX) -> None:
    """Any container of this module (or of one Pod) a timeout left behind: ``--rm`` removes the others."""
    names = run(["podman", "ps", "-a", "--filter", f"name=^{prefix}", "--format", "{{.Names}}"], 60).stdout.split()
    for name in names:
        run(["podman", "rm", "-f", name], 60)


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(IMAGE)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    return small_cohort(tmp_path_factory.mktemp("container-cohort"))


@pytest.fixture(scope="module")
def host_results(cohort, job, tmp_path_factory) -> Path:
    """The same bundles graded by grade-batch on the host, their seeds keyed with the secret the Job's Pods made
    once on the volume (as an instructor keeps one secret for a course's gradings)."""
    results = tmp_path_factory.mktemp("host") / "results"
    secret = job["volume"] / "results" / SECRET_FILE
    command = [GPULAB, "grade-batch", str(cohort), "--jobs", "2", "--out", str(results), "--seed-secret", str(secret)]
    batch = run(command, 1800)
    assert batch.returncode == 0, batch.stderr[-3000:]
    return results


def run_index(manifest: dict[str, Any], volume: Path, index: int) -> dict[str, Any]:
    """Index ``index``'s Pod, and its retries as the Job makes them (``backoffLimitPerIndex``)."""
    attempts: list[dict[str, Any]] = []
    for attempt in range(manifest["spec"]["backoffLimitPerIndex"] + 1):
        started, name = time.monotonic(), f"{PREFIX}-{index}-{attempt}"
        try:
            done = run(pod_command(manifest, volume, index, name), 900)
        finally:
            remove_containers(f"{name}$")
        attempts.append({"exit": done.returncode, "from": started, "to": time.monotonic(), "out": done.stdout,
                         "err": done.stderr[-3000:]})  # fmt: skip
        if done.returncode != 1:  # 1 alone asks the Job to try the index again
            break
    return {"index": index, "attempts": attempts}


@pytest.fixture(scope="module")
def job(image, cohort, tmp_path_factory) -> Any:
    made = run([GPULAB, "job-manifest", str(cohort), f"--image={image}", "--claim=gpulab-work", "--parallelism=2"])
    assert made.returncode == 0, made.stderr
    manifest = yaml.safe_load(made.stdout)
    volume = tmp_path_factory.mktemp("claim") / "gpulab-work"
    shared_volume(volume, cohort, manifest)
    try:
        with ThreadPoolExecutor(manifest["spec"]["parallelism"]) as pool:
            pods = list(pool.map(lambda i: run_index(manifest, volume, i), range(manifest["spec"]["completions"])))
        yield {"manifest": manifest, "volume": volume, "pods": pods}
    finally:
        remove_containers()
        shutil.rmtree(volume, ignore_errors=True)


def test_each_pod_grades_its_bundle_as_grade_batch_does(job, host_results, cohort):
    learners = [bundle.name.removesuffix(".gpulab.tar.gz") for bundle in sorted(cohort.iterdir())]
    for pod, learner in zip(job["pods"], learners, strict=True):
        assert [attempt["exit"] for attempt in pod["attempts"]] == [0], pod  # 1 alone (an error) is tried again
        assert pod["attempts"][0]["out"].startswith(f"{learner}.gpulab.tar.gz: "), pod
    container_results = job["volume"] / "results"
    statuses = same_as_host(container_results, host_results, learners)
    assert statuses["reference"][0] == "graded"
    assert statuses["reference"][1] == statuses["reference"][2]
    assert statuses["trap-version-string"][1] < statuses["trap-version-string"][2]
    assert {learner: status[0] for learner, status in statuses.items() if status[0] != "graded"} == {
        "broken-truncated": "refused", "broken-tools-a-list": "refused"}  # fmt: skip
    assert "tools' versions wrongly" in outcome(container_results, "broken-tools-a-list")["reason"]


def test_the_pods_ran_two_at_a_time(job):
    spans = [(attempt["from"], attempt["to"]) for pod in job["pods"] for attempt in pod["attempts"]]
    overlapping = [(a, b) for a in spans for b in spans if a < b and b[0] < a[1]]
    assert overlapping, spans
    assert job["manifest"]["spec"]["parallelism"] == 2


def normalized(text: str) -> str:
    return BUNDLED_ROOT.sub("ROOT", text)


def test_the_cohort_report_on_the_volume_is_the_host_s(job, host_results):
    results = job["volume"] / "results"
    made = run([GPULAB, "cohort-report", str(results)], 300)
    assert made.returncode == 0, made.stderr
    for name in ("cohort.json", "cohort.csv"):
        assert normalized((results / name).read_text()) == normalized((host_results / name).read_text()), name


# As Gradescope does, in a fresh container of the Debian base: the zip into /autograder/source, setup.sh
# once as root, then run_autograder for each upload. Offline but for apt (setup.sh installs procps and
# python3-venv from Debian's mirror); the binaries are mounted into the cache, so Go is not downloaded.
GRADESCOPE = r"""set -eu
mkdir -p /autograder/source && cd /autograder/source && python3 -m zipfile -e /in/autograder.zip .
bash /autograder/source/setup.sh
cp /autograder/source/run_autograder /autograder/run_autograder
for learner in "$@"; do
  rm -rf /autograder/submission /autograder/results && mkdir -p /autograder/submission /out/"$learner"
  cp /in/"$learner".gpulab.tar.gz /autograder/submission/
  bash /autograder/run_autograder
  cp /autograder/results/results.json /autograder/results/gpulab/report.json /out/"$learner"/
done
"""


@pytest.fixture(scope="module")
def gradescope(cohort, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Each upload's results.json and grading report, from one fresh container of the Debian base."""
    out = tmp_path_factory.mktemp("gradescope")
    into = out / "in"
    into.mkdir()
    packaged = run(["bash", str(CHECKOUT / "gradescope" / "package"), str(into / "autograder.zip")], 120)
    assert packaged.returncode == 0, packaged.stderr
    learners = ("reference", "trap-version-string")
    for learner in learners:
        shutil.copy(cohort / f"{learner}.gpulab.tar.gz", into)
    cache = f"/root/.cache/pytest-gpulab/{toolchain.bin_dir().parent.name}/bin"
    mounts = [f"--volume={into}:/in:ro", f"--volume={WHEELHOUSE}:/wheelhouse:ro", f"--volume={out}:/out",
              f"--volume={toolchain.bin_dir()}:{cache}:ro"]  # fmt: skip
    env = ["--env=PIP_NO_INDEX=1", "--env=PIP_FIND_LINKS=/wheelhouse"]
    try:  # no --privileged: podman's default capabilities and seccomp profile, as a Docker host gives
        done = run([*PODMAN, f"--name={PREFIX}-gradescope", *mounts, *env, BASE, "bash", "-c", GRADESCOPE,
                    "gradescope", *learners], 1800)  # fmt: skip
    finally:
        remove_containers(f"{PREFIX}-gradescope$")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {
        learner: {name: json.loads((out / learner / f"{name}.json").read_text()) for name in ("results", "report")}
        for learner in learners
    }


def failing(report: dict[str, Any]) -> dict[int, list[str]]:
    return {s["number"]: [c["message"] for c in s["checks"] if c.get("message")] for s in report["steps"]
            if s["outcome"] != "passed"}  # fmt: skip


def test_the_gradescope_package_sets_up_and_grades_in_a_fresh_debian_container(gradescope):
    """setup.sh and run_autograder work as root in a container without privilege; bubblewrap cannot make its
    namespaces there (no CAP_SYS_ADMIN), so the report says which protections remain: limits and a uid."""
    for learner, found in gradescope.items():
        print(f"Gradescope container, {learner}: {found['results']['score']}; sandbox: {found['report']['sandbox']}")
        assert found["report"]["complete"] and found["results"]["tests"], learner
        assert found["report"]["sandbox"].startswith("learner scripts run with reduced protection: no sandbox")
    trap = gradescope["trap-version-string"]["report"]
    assert any("not an integer" in message for message in failing(trap).get(1, [])), failing(trap)


def test_a_right_bundle_gets_full_marks_in_the_gradescope_container(gradescope):
    """The scripts run as a uid of their own from copies it can reach (sandbox/stage.py); 85 before (step 4)."""
    found = gradescope["reference"]
    assert found["results"]["score"] == pytest.approx(100), failing(found["report"])
