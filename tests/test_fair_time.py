"""Fair time in a batch: a bundle whose checker starts 120 busy loops, graded beside an honest one in a real
``gpulab grade-batch --jobs 2``, moves nothing of the honest one's grade, in 5 of 5 batches; and its median
grading time beside it, against beside another honest bundle, is a benchmark (``bench/fair_time.py``).

The starver is gpurt's reference with its crosscheck (``bin/rc-crosscheck.sh``, which step 6 runs) replaced by
a script that fills the CPU for a few seconds of each run, then fails; the honest bundles are the reference
itself. The starver's own step 6 fails (its runs end before their timeout, so each is its own).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cohort_cases import verdicts
from grading import solve

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort import regrade
from pytest_gpulab.cohort.bundle import write_bundle
from pytest_gpulab.cohort.regrade import grade_bundle
from pytest_gpulab.grading.feedback import MachineBusy
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.labs import discover
from pytest_gpulab.sandbox import cgroups
from pytest_gpulab.sandbox import confine as sandbox
from pytest_gpulab.selftest.variants import copy_root

LAB = "gpurt"
CROSSCHECK = "bin/rc-crosscheck.sh"
STARVE = "#!/bin/bash\nfor i in $(seq 120); do (while :; do :; done) & done\nwait\n"
STARVE_A_WHILE = "#!/bin/bash\nfor i in $(seq 120); do (while :; do :; done) & done\nsleep 2\nkill $(jobs -p)\nexit 2\n"
BATCHES = 5
pytestmark = [
    pytest.mark.skipif(not sandbox.probe().namespaces, reason="no sandbox on this machine"),
    pytest.mark.skipif(not cgroups.hierarchies().cpu, reason="no cgroup cpu controller the grader may use"),
]


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[ScriptRunner]:
    (tmp_path / "lab" / "bin").mkdir(parents=True)
    scripts = ScriptRunner(tmp_path / "work", 4.0, lambda: None, lab_root=tmp_path / "lab", sandbox=sandbox.probe())
    yield scripts
    scripts.close()


def script(runner: ScriptRunner, text: str) -> Path:
    assert runner.lab_root is not None
    path = runner.lab_root / "bin" / "check.sh"
    path.write_text(text)
    path.chmod(0o755)
    return path


def run_groups() -> list[Path]:
    where = cgroups.hierarchies()
    roots = (where.cpu, where.pids, where.unified)
    patterns = (f"{cgroups.PARENT}/run-{os.getpid()}-*", f"{cgroups.grading()}/run-*", cgroups.grading())
    return [group for root in roots if root for pattern in patterns for group in root.glob(pattern)]


def test_a_script_s_loops_get_one_cpu_at_most_and_leave_nothing(runner):
    """120 busy loops in one run weigh as one, and have one CPU at most; their groups go with the run."""
    try:
        result = runner.run(script(runner, STARVE)).result
        assert result.timed_out and result.cpu is not None, result
        used, seconds = result.cpu.used, result.duration
    except MachineBusy as busy:  # on a machine busy with other work, it is starved as well as crowded
        used, seconds = busy.detail["cpu_seconds"], busy.detail["seconds"]
    assert used <= 1.2 * seconds, (used, seconds)
    assert run_groups() == []


def test_groups_a_killed_grader_left_are_removed_by_the_next_run_s():
    """Only old empty groups named for a process that is gone: a live grader's, or a young one, stay."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    where = cgroups.hierarchies()
    root = where.cpu or where.unified
    assert root is not None
    graded, alive = root / f"{cgroups.PARENT}-{gone.pid}", root / cgroups.grading()
    old, young, kept = graded / f"run-{gone.pid}-old", graded / f"run-{gone.pid}-young", alive / "run-0-kept"
    made = (graded, old, young, alive, kept)
    for group in made:
        group.mkdir(exist_ok=group == alive)
    for group in (graded, old, alive, kept):
        os.utime(group, (time.time() - 2 * cgroups.STALE_AFTER,) * 2)
    try:
        cgroups.RunGroup.make(8).close()
        assert [group.exists() for group in made] == [True, False, True, True, True]
        young.rmdir()
        os.utime(graded, (time.time() - 2 * cgroups.STALE_AFTER,) * 2)
        cgroups.RunGroup.make(8).close()
        assert not graded.exists()  # its last run gone, the grading's group goes too
    finally:
        for group in reversed(made):
            if group.exists():
                group.rmdir()


@pytest.mark.parametrize(
    ("waited", "used", "starved"),
    [
        (0.1, 4.0, False),  # had its CPU: a script that loops forever times out as its own failure
        (2.0, 2.0, False),  # crowded by its own processes past its one CPU, yet it had half of one
        (0.5, 0.1, False),  # little CPU, but it mostly slept (waiting on the API server or sleep)
        (3.0, 0.5, True),  # ready to run and given no CPU most of the time: the machine starved it
    ],
)
def test_starved_means_waiting_for_a_cpu_and_getting_little(waited, used, starved):
    assert cgroups.starved(cgroups.CpuTime(waited, used), 4.0) is starved
    assert cgroups.starved(None, 4.0) is False  # where the kernel keeps nothing, a timeout is the script's


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """Every CPU taken by processes that outweigh all scripts together: a machine the grader cannot help."""
    where = cgroups.hierarchies()
    assert where.cpu is not None
    group = where.cpu / f"tests-busy-{os.getpid()}"
    group.mkdir()
    (group / "cpu.shares").write_text("262144")
    enter = f"echo 0 > {group}/cgroup.procs && exec {sys.executable} -c 'while True: pass'"
    hogs = [subprocess.Popen(["sh", "-c", enter]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        group.rmdir()


def test_a_script_the_machine_starves_is_graded_again_not_failed(runner, busy_machine):
    with pytest.raises(MachineBusy, match=r"check.sh ran out of time while the grading machine was too busy"):
        runner.run(script(runner, "#!/bin/bash\nwhile :; do :; done\n"))
    assert run_groups() == []


def test_a_machine_that_would_run_scripts_as_the_grader_refuses_to_grade_bundles(tmp_path, monkeypatch):
    """No sandbox and no uid of their own (a Pod where bubblewrap cannot run, graded as a user): an error naming
    what is missing, and no grading at all."""
    bare = sandbox.Sandbox("none", None, missing=("no sandbox: bubblewrap could not make namespaces here",))
    monkeypatch.setattr(regrade, "probe", lambda: bare)
    outcome = regrade.grade_bundle(tmp_path / "any.gpulab.tar.gz", tmp_path / "out")
    assert outcome.status == "error"
    assert "would run as the grader's own user" in (outcome.reason or "")
    assert "bubblewrap could not make namespaces" in (outcome.reason or "")
    assert json.loads((tmp_path / "out" / "outcome.json").read_text())["status"] == "error"
    assert not (tmp_path / "out" / "report.json").exists()


def bundles(base: Path) -> dict[str, Path]:
    """The honest work, an honest twin of it and the starver, each a bundle in a folder of its own."""
    honest = base / "honest"
    honest.mkdir()
    made = {}
    with KwokCluster.for_lab(LAB, name="tests-fair-time") as cluster:
        solve(LAB, cluster, honest)
        starver = copy_root(honest, base / "starver")
        (starver / CROSSCHECK).write_text(STARVE_A_WHILE)
        for learner, root in (("b-honest", honest), ("a-twin", honest), ("a-starver", starver)):
            bundle = base / "bundles" / learner / f"{learner}.gpulab.tar.gz"
            bundle.parent.mkdir(parents=True)
            write_bundle(discover().get(LAB), root, cluster, bundle, learner=learner)
            made[learner] = bundle
    return made


def batch(folder: Path, out: Path) -> dict[str, dict]:
    """A real ``gpulab grade-batch --jobs 2`` of the bundles in ``folder``: each learner's report and outcome."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("gpulab")), "grade-batch", str(folder), "--jobs", "2", "--out", str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return {
        learner.name: {
            "report": json.loads((learner / "report.json").read_text()),
            "outcome": json.loads((learner / "outcome.json").read_text()),
        }
        for learner in out.iterdir()
        if (learner / "outcome.json").exists()
    }


def pair(base: Path, made: dict[str, Path], neighbour: str, name: str) -> Path:
    folder = base / name
    folder.mkdir()
    for learner in (neighbour, "b-honest"):
        shutil.copyfile(made[learner], folder / made[learner].name)
    return folder


@pytest.mark.timeout(1200)  # five real batches; the starver's are each a minute on a quiet machine
def test_a_starving_neighbour_moves_nothing_of_an_honest_grade(tmp_path):
    """The honest bundle's verdicts and points beside the starver equal those graded alone, in 5 of 5 batches.
    How much longer its grading takes beside the starver than beside its twin is a benchmark figure
    (``bench/fair_time.py``), not an assertion: a loaded machine moves it."""
    made = bundles(tmp_path)
    alone = grade_bundle(made["b-honest"], tmp_path / "alone")
    assert alone.status == "graded" and alone.earned == alone.possible, alone.reason
    expected = verdicts(json.loads((tmp_path / "alone" / "report.json").read_text()))
    for number in range(BATCHES):
        graded = batch(pair(tmp_path, made, "a-starver", f"starver-{number}"), tmp_path / f"starver-{number}.out")
        honest, starver = graded["b-honest"], graded["a-starver"]
        assert verdicts(honest["report"]) == expected, f"batch {number + 1}"
        assert honest["outcome"]["earned"] == alone.earned, f"batch {number + 1}"
        crosscheck = next(step for step in starver["report"]["steps"] if step["number"] == 6)
        assert crosscheck["outcome"] == "failed", crosscheck
