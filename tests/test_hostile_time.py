"""Hostile bundles bounded in time: five attacks on a grading's time (``hostile_bundles.py``: a memory hog across
many processes, an output flood, a fork bomb, a disk fill, a signal-ignoring sleeper), each graded in a real
``gpulab grade-batch --jobs 2`` beside an honest bundle, whose verdicts must equal its verdicts graded alone; the
attack's script is run once to its forced end, and every later run of it is that end again, in the same words.
How long each takes is a benchmark (``bench/hostile_times.py``), never an assertion: a loaded machine moves it.

And the Job's grader stopped by SIGTERM (a Pod deleted): ``gpulab job-entry`` stops its grading, its scripts and
its cluster, records no outcome, and exits non-zero so that the index is graded again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from cohort_cases import verdicts
from hostile_bundles import ATTACKS, HONEST, beside_honest, bundles

from pytest_gpulab import budget as budget_module
from pytest_gpulab.budget import GradingBudget
from pytest_gpulab.cohort.jobs import STOPPED
from pytest_gpulab.cohort.regrade import grade_bundle
from pytest_gpulab.grading.feedback import MachineBusy, StepFailed
from pytest_gpulab.grading.scripts.keeps import Keeps
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.labs.waiting import wait_until
from pytest_gpulab.sandbox import cgroups
from pytest_gpulab.sandbox import confine as sandbox
from pytest_gpulab.sandbox.cgroups import CpuTime
from pytest_gpulab.sandbox.disk import DISK_BYTES

pytestmark = pytest.mark.skipif(not sandbox.probe().namespaces, reason="no sandbox on this machine")
CAUSES = {  # each attack's first forced end, as its learner text says it
    "memory-hog": ("of memory at once",),  # 2 GiB in a grading, 256 MiB in the runner below
    "output-flood": ("it printed more than 1 MiB",),
    "fork-bomb": ("processes at once",),
    "disk-fill": ("(timeout)", "of memory at once", "wrote more than 256 MiB"),  # full tmpfs blanks are memory,
    # and a writable folder of the grader's (a kept state, a writable input's folder) is counted
    "signal-ignoring-sleeper": ("(timeout)",),
}
LIMITED = cgroups.hierarchies().memory is not None and cgroups.hierarchies().pids is not None


@pytest.fixture
def runner(tmp_path) -> Iterator[ScriptRunner]:
    (tmp_path / "lab" / "bin").mkdir(parents=True)
    for attack, text in {**ATTACKS, "honest": "#!/bin/sh\necho OK\n"}.items():
        (script := tmp_path / "lab" / "bin" / f"{attack}.sh").write_text(text)
        script.chmod(0o755)
    probed = sandbox.probe()  # a memory bound of 256 MiB, reached in a moment even on a busy machine
    small = replace(probed, limits=replace(probed.limits, memory_bytes=256 * 1024**2))
    scripts = ScriptRunner(tmp_path / "work", 4.0, lambda: None, lab_root=tmp_path / "lab", sandbox=small)
    yield scripts
    scripts.close()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_script_s_later_runs_are_its_first_forced_end_given_again(runner, attack):
    script = runner.lab_root / "bin" / f"{attack}.sh"
    first = runner.run(script, "a").result
    assert first.forced and not first.repeated, first
    if LIMITED or attack not in ("memory-hog", "fork-bomb"):
        assert any(cause in first.describe() for cause in CAUSES[attack]), first.describe()
    again = [runner.run(script, argument).result for argument in ("a", "b", "c")]
    if attack == "output-flood":  # ended at its limit in a moment: each run is made, and says the same
        assert all(not run.repeated and run.describe() == first.describe() for run in again), again
    else:
        assert all(run.repeated and run.describe() == first.describe() for run in again), again
    assert runner.run(runner.lab_root / "bin" / "honest.sh").result.stdout == "OK\n"  # another script runs


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_blocks * 512 for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def test_a_disk_fill_in_a_kept_state_is_stopped_near_its_bound(runner, tmp_path):
    """A state kept across runs is a folder of the grader's disk, not a bounded tmpfs: the run is stopped once its
    folders hold more than DISK_BYTES, and they hold not much more (before, one run left 53 GB)."""
    script = runner.lab_root / "bin" / "disk-fill.sh"
    kept = tmp_path / "kept"
    result = runner.run(script, "a", keeps=Keeps(state=kept)).result
    assert result.forced and "wrote more than 256 MiB" in result.describe(), result.describe()
    assert DISK_BYTES < folder_bytes(kept) < 8 * DISK_BYTES


def test_a_forced_end_stands_for_runs_of_its_kind_only(runner):
    """A checker that hangs only when the API server is unreachable is not failed, without a run, for the rest."""
    script = runner.lab_root / "bin" / "hangs-without-api.sh"
    script.write_text('#!/bin/bash\nif [ "$1" = hang ]; then sleep 1000; fi\necho OK\n')
    script.chmod(0o755)
    hung = runner.run(script, "hang", containerd=False).result
    assert hung.timed_out and not hung.repeated, hung
    assert runner.run(script, "again", containerd=False).result.repeated, "the same kind: given again"
    other = runner.run(script, "fine").result
    assert not other.repeated and other.stdout == "OK\n", other


def test_a_script_the_machine_starved_is_the_machine_s_error_at_once_for_its_later_runs(runner, monkeypatch):
    """The grading is an error, graded again, whatever its later runs would find: they are not run."""
    taken = []

    def starved(path, once):
        taken.append(path)
        raise MachineBusy("busy.sh ran out of time while the grading machine was too busy to run it.")

    monkeypatch.setattr(runner._turns, "take", starved)
    for argument in ("a", "b", "c"):
        with pytest.raises(MachineBusy, match="too busy"):
            runner.run(runner.lab_root / "bin" / "honest.sh", argument)
    assert len(taken) == 1


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    return bundles(tmp_path_factory.mktemp("hostile-time"))


@pytest.fixture(scope="module")
def alone(made, tmp_path_factory) -> dict:
    """The honest bundle graded alone: its report."""
    out = tmp_path_factory.mktemp("alone")
    graded = grade_bundle(made[HONEST], out)
    assert graded.status == "graded" and graded.earned == graded.possible, graded.reason
    return json.loads((out / "report.json").read_text())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_attack_on_time_ends_at_its_first_forced_run_and_moves_nothing_of_its_neighbour(
    made, alone, attack, tmp_path
):
    graded = beside_honest(tmp_path, made, attack, "batch")
    honest, hostile = graded[HONEST], graded[attack]
    assert verdicts(honest["report"]) == verdicts(alone), attack
    assert honest["outcome"]["earned"] == alone["earned"]
    assert hostile["outcome"]["status"] == "graded", hostile["outcome"]
    crosscheck = next(step for step in hostile["report"]["steps"] if step["number"] == 6)
    assert crosscheck["outcome"] == "failed", crosscheck
    checks = [check for check in crosscheck["checks"] if check["outcome"] == "failed"]
    causes = CAUSES[attack] if LIMITED or attack not in ("memory-hog", "fork-bomb") else ("",)
    said = [check["message"] for check in checks if any(cause in (check["message"] or "") for cause in causes)]
    assert len(said) >= len(checks) // 2, [check["message"] for check in checks]
    repeated = [check for check in checks if "given again without running it" in json.dumps(check.get("detail"))]
    assert repeated or attack == "output-flood", "no run was given again at once"
    assert all(check["message"] in {c["message"] for c in checks} for check in repeated)


def processes_naming(folder: Path) -> list[str]:
    listed = subprocess.run(["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in listed.splitlines() if str(folder) in line]


@pytest.mark.timeout(300)
def test_job_entry_stopped_by_sigterm_ends_its_grading_records_nothing_and_exits_non_zero(made, tmp_path):
    """The sleeper's grading takes its script's timeout at least: SIGTERM comes while pytest grades."""
    bundles_dir, out, private = tmp_path / "bundles", tmp_path / "results", tmp_path / "tmp"
    for folder in (bundles_dir, private):
        folder.mkdir()
    bundle = made["signal-ignoring-sleeper"]
    (bundles_dir / bundle.name).write_bytes(bundle.read_bytes())
    learner = out / "signal-ignoring-sleeper"
    env = {**os.environ, "JOB_COMPLETION_INDEX": "0", "TMPDIR": str(private)}
    entry = subprocess.Popen(
        [str(Path(sys.executable).with_name("gpulab")), "job-entry", "--bundles", str(bundles_dir), "--out", str(out)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert wait_until(lambda: (learner / "report.json").exists(), 120), "the grading never started"
        entry.send_signal(signal.SIGTERM)
        stdout, stderr = entry.communicate(timeout=120)
    finally:
        entry.kill()
    assert entry.returncode == STOPPED, stdout + stderr
    assert "stopped by SIGTERM" in stderr
    assert not (learner / "outcome.json").exists()
    report = json.loads((learner / "report.json").read_text())
    assert report["complete"] is False
    assert wait_until(lambda: processes_naming(private) == [], 30), processes_naming(private)
    assert wait_until(lambda: list(private.iterdir()) == [], 30), list(private.iterdir())


@pytest.mark.parametrize(("waited", "used", "outcome"), [(0.5, 1.0, StepFailed), (3.0, 0.5, MachineBusy)])
def test_a_spent_budget_is_the_learner_s_unless_the_machine_starved_the_grader(monkeypatch, waited, used, outcome):
    """Past the budget: the learner's scripts used it, or (the starved-run rule, on the grader's own threads) the
    machine did, an error to grade again."""
    config = SimpleNamespace(stash=pytest.Stash())
    budget = GradingBudget(config, 4.0)  # type: ignore[arg-type]
    monkeypatch.setattr(budget_module, "_own_cpu", lambda: CpuTime(budget.cpu_at_start.waited + waited,
                                                                   budget.cpu_at_start.used + used))  # fmt: skip
    spent = budget.spent(4.5)
    assert type(spent) is outcome
    assert spent.message.startswith("Not graded: the grading ran past its 4 s"), spent.message


@pytest.mark.timeout(600)
def test_past_its_budget_a_grading_fails_the_checks_not_yet_graded_naming_the_script(made, tmp_path):
    graded = grade_bundle(made["signal-ignoring-sleeper"], tmp_path / "out", extra_args=("--grading-budget=5",))
    assert graded.status == "graded", graded.reason
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True
    spent = [check for step in report["steps"] for check in step["checks"]
             if (check["message"] or "").startswith("Not graded: the grading ran past its 5 s")]  # fmt: skip
    assert spent, [(check["id"], check["message"]) for step in report["steps"] for check in step["checks"]]
    assert any("rc-crosscheck.sh" in check["message"] for check in spent), spent[0]
    assert all(check["outcome"] == "failed" for check in spent)
