"""The cohort's bundles graded past one machine: as a Kubernetes Indexed Job's Pods, and as Gradescope does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from cohort_cases import CohortRun

from pytest_gpulab.cluster import toolchain
from pytest_gpulab.labs.waiting import wait_until

CHECKOUT = Path(__file__).resolve().parent.parent
GPULAB = str(Path(sys.executable).with_name("gpulab"))
WHEELHOUSE = toolchain.cache_root() / "wheelhouse"  # made by scripts/setup
LEARNERS = ("broken-truncated", "reference", "trap-version-string")  # by file name: indexes 0, 1, 2
pytestmark = pytest.mark.timeout(3600)


def gpulab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GPULAB, *args], env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip


def some_bundles(cohort: CohortRun, into: Path) -> Path:
    into.mkdir()
    for learner in LEARNERS:
        name = f"{learner}.gpulab.tar.gz"
        (into / name).write_bytes((cohort.builder.bundles / name).read_bytes())
    return into


def test_the_job_manifest_is_taken_server_side_and_its_pods_get_their_indexes(gpuop_cohort, gpuop_cluster, tmp_path):
    bundles = some_bundles(gpuop_cohort, tmp_path / "bundles")
    made = gpulab("job-manifest", str(bundles), "--image=registry.example/pytest-gpulab:1", "--claim=gpulab-work",
                  "--namespace=grading-job", "--parallelism=2")  # fmt: skip
    assert made.returncode == 0, made.stderr
    (tmp_path / "job.yaml").write_text(made.stdout)
    gpuop_cluster.kubectl("create", "namespace", "grading-job")
    applied = gpuop_cluster.kubectl(
        "apply", "--server-side", "--field-manager=gpulab", "-f", str(tmp_path / "job.yaml")
    )
    assert "serverside-applied" in applied.stdout
    job = gpuop_cluster.get_json("job", "gpulab-grade", "-n", "grading-job")
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == len(LEARNERS)
    assert job["spec"]["parallelism"] == 2

    def indexes() -> set[str]:
        pods = gpuop_cluster.get_json("pods", "-n", "grading-job", "-l", "job-name=gpulab-grade")["items"]
        return {p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") for p in pods}

    assert wait_until(lambda: indexes() == {"0", "1"}, 60), indexes()  # the Job controller's, two at a time
    pod = gpuop_cluster.get_json("pods", "-n", "grading-job", "-l", "job-name=gpulab-grade")["items"][0]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert "JOB_COMPLETION_INDEX" in env, env
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "gpulab-work"


def test_each_job_index_grades_its_own_bundle(gpuop_cohort, tmp_path):
    bundles, results = some_bundles(gpuop_cohort, tmp_path / "bundles"), tmp_path / "results"
    for index, learner in enumerate(LEARNERS):
        ran = gpulab("job-entry", f"--bundles={bundles}", f"--out={results}", env={"JOB_COMPLETION_INDEX": str(index)})
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.startswith(f"{learner}.gpulab.tar.gz: ")
        ours = json.loads((results / learner / "outcome.json").read_text())
        batch = json.loads((gpuop_cohort.results / learner / "outcome.json").read_text())
        assert (ours["status"], ours["earned"]) == (batch["status"], batch["earned"])
    beyond = gpulab("job-entry", f"--bundles={bundles}", f"--out={results}", env={"JOB_COMPLETION_INDEX": "3"})
    assert beyond.returncode == 2
    assert "index 3 has no bundle" in beyond.stderr
    unset = gpulab("job-entry", f"--bundles={bundles}", f"--out={results}", env={"JOB_COMPLETION_INDEX": "x"})
    assert unset.returncode == 2
    assert "Indexed Job" in unset.stderr
    assert gpulab("cohort-report", str(results)).returncode == 0
    assert json.loads((results / "cohort.json").read_text())["learners"] == len(LEARNERS)


def run_autograder(root: Path) -> dict:
    ran = subprocess.run(
        ["bash", str(CHECKOUT / "gradescope" / "run_autograder")],
        env={**os.environ, "GPULAB_AUTOGRADER_ROOT": str(root), "GPULAB_AUTOGRADER_GPULAB": GPULAB},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return json.loads((root / "results" / "results.json").read_text())


@pytest.mark.parametrize(
    ("uploaded", "score", "says"),
    [
        (("reference",), 100, None),
        (("trap-version-string",), 90, None),
        (("broken-truncated",), 0, "could not be graded"),
        ((), 0, "Upload exactly one bundle"),
    ],
)
def test_run_autograder_grades_the_upload_into_results_json(gpuop_cohort, tmp_path, uploaded, score, says):
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    for learner in uploaded:
        name = f"{learner}.gpulab.tar.gz"
        (root / "submission" / name).write_bytes((gpuop_cohort.builder.bundles / name).read_bytes())
    results = run_autograder(root)
    total = results.get("score", sum(test.get("score", 0) for test in results.get("tests", [])))
    assert total == pytest.approx(score), results
    if says:
        assert says in results["output"], results
    else:
        assert results["tests"]
        assert all("name" in test for test in results["tests"])


def test_the_job_manifest_is_valid_yaml_for_any_count(tmp_path):
    (tmp_path / "a.gpulab.tar.gz").write_bytes(b"")
    made = gpulab("job-manifest", str(tmp_path), "--image=i", "--claim=c")
    assert made.returncode == 0, made.stderr
    assert yaml.safe_load(made.stdout)["spec"]["completions"] == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert gpulab("job-manifest", str(empty), "--image=i", "--claim=c").returncode == 1


@pytest.mark.parametrize("seccomp", [None, "profiles/gpulab-bwrap.json"], ids=["runtime-default", "localhost"])
def test_the_job_s_pods_ask_for_no_privilege_and_the_api_server_takes_them(gpuop_cluster, tmp_path, seccomp):
    """The measured context (README, Past one machine): non-root, no capability, no escalation, a read-only
    image, the Pod's own user namespace and an unmasked /proc; the API server validates it whole."""
    (tmp_path / "a.gpulab.tar.gz").write_bytes(b"")
    extra = [f"--seccomp-profile={seccomp}"] if seccomp else []
    namespace = f"job-context-{'localhost' if seccomp else 'default'}"
    made = gpulab("job-manifest", str(tmp_path), "--image=i", "--claim=c", f"--namespace={namespace}", *extra)
    assert made.returncode == 0, made.stderr
    (tmp_path / "job.yaml").write_text(made.stdout)
    gpuop_cluster.kubectl("create", "namespace", namespace)
    gpuop_cluster.kubectl("apply", "--server-side", "--field-manager=gpulab", "-f", str(tmp_path / "job.yaml"))
    pod = gpuop_cluster.get_json("job", "gpulab-grade", "-n", namespace)["spec"]["template"]["spec"]
    container = pod["containers"][0]["securityContext"]
    assert pod["hostUsers"] is False
    assert "privileged" not in json.dumps(pod).replace('"privileged": false', "")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["capabilities"]["drop"] == ["ALL"]
    assert container["allowPrivilegeEscalation"] is False
    assert container["procMount"] == "Unmasked"
    assert container["readOnlyRootFilesystem"] is True
    expected = {"type": "Localhost", "localhostProfile": seccomp} if seccomp else {"type": "RuntimeDefault"}
    assert pod["securityContext"]["seccompProfile"] == expected


def test_the_gradescope_package_sets_up_from_its_zip_and_grades(gpuop_cohort, tmp_path):
    """The zip `gradescope/package` writes, unpacked as Gradescope does; setup.sh (offline: the wheelhouse
    scripts/setup made, Go and the built binaries present), then run_autograder with what it installed."""
    packaged = subprocess.run(["bash", str(CHECKOUT / "gradescope" / "package"), str(tmp_path / "autograder.zip")],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert packaged.returncode == 0, packaged.stderr
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        archive.extractall(root / "source")
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert modes["setup.sh"] & 0o111
    assert modes["run_autograder"] & 0o111
    assert "pyproject.toml" in modes
    offline = {"GPULAB_AUTOGRADER_ROOT": str(root), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE)}
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env={**os.environ, **offline},
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    (root / "submission").mkdir()
    name = "reference.gpulab.tar.gz"
    (root / "submission" / name).write_bytes((gpuop_cohort.builder.bundles / name).read_bytes())
    ran = subprocess.run(["bash", str(root / "source" / "run_autograder")], env={**os.environ, **offline},
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads((root / "results" / "results.json").read_text())["score"] == 100
