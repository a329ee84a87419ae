"""Runs started ahead work one per core, and a run that only waits gives its core to the next: a script that hangs in
each of its circumstances hangs in all of them side by side, and the later runs of a circumstance it hangs in are
that hang's end again (issue 46, part 4). A run that works, or holds memory, keeps its core."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpulab.grading.scripts.runs import Run
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox import confine
from pytest_gpulab.sandbox.cgroups import RunGroup

SANDBOX = confine.probe()
SLEEPER = "#!/bin/bash\ntrap '' TERM INT HUP QUIT USR1 USR2\nsleep 1000\n"


def _accounted() -> bool:
    group = RunGroup.make(16, memory=1 << 30)
    try:
        return group.cpu_wanted() is not None and group.memory_used() is not None
    finally:
        group.close()


pytestmark = pytest.mark.skipif(
    not SANDBOX.namespaces or not _accounted(), reason="a run's CPU and memory are not accounted on this machine"
)


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[ScriptRunner]:
    (tmp_path / "lab" / "bin").mkdir(parents=True)
    tmp_path.chmod(0o755)
    scripts = ScriptRunner(tmp_path / "work", 6.0, lambda: None, lab_root=tmp_path / "lab", sandbox=SANDBOX, cores=1)
    yield scripts
    scripts.close()


def script(runner: ScriptRunner, name: str, text: str) -> Path:
    assert runner.lab_root is not None
    path = runner.lab_root / "bin" / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_runs_that_only_wait_hang_side_by_side_on_one_core(runner):
    """On a machine of one core, the sleeper's run with containerd and its run without hang at the same time."""
    runs = runner.runs_of(script(runner, "sleeper", SLEEPER)).ahead(Run(), Run(containerd=False))
    first, second = runs.run(), runs.run(containerd=False)
    assert first.result.timed_out and second.result.timed_out, (first.result.describe(), second.result.describe())
    assert max(first.started, second.started) < min(first.ended, second.ended)  # both were going at once


def test_later_runs_of_a_circumstance_it_hangs_in_are_that_hangs_end_again(runner):
    """Eight runs of one circumstance: those asked for once the first has waited a while are its end again, at once,
    in its words; none is left out."""
    runs = runner.runs_of(script(runner, "sleeper", SLEEPER)).ahead(*(Run(str(index)) for index in range(8)))
    results = [runs.run(str(index)).result for index in range(8)]
    assert {result.describe() for result in results} == {"was stopped after 6 s (timeout)"}
    assert any(result.repeated for result in results)
    assert not results[0].repeated


@pytest.mark.parametrize(
    "text",
    [
        "#!/bin/bash\nend=$((SECONDS + 3))\nwhile [ $SECONDS -lt $end ]; do :; done\necho done\n",  # works all along
        '#!/bin/bash\nexec python3 -c \'import time; held = b"x" * (300 << 20); time.sleep(3); print("done")\'\n',
    ],
    ids=["busy-loop", "sleeps-holding-300-MiB"],
)
def test_a_run_that_works_or_holds_memory_keeps_its_core(runner, text):
    """On one core, the next run (another script's) starts only once this one has ended: a busy loop keeps its core
    however busy the machine (waiting for a CPU is working), and so does a sleeper holding memory."""
    holds, honest_script = script(runner, "holds", text), script(runner, "honest", "#!/bin/bash\necho OK\n")
    held = runner.runs_of(holds).ahead(Run())  # both written first: the lab root is snapshotted by the first run
    honest = runner.runs_of(honest_script).ahead(Run())
    first, second = held.run(), honest.run()
    assert first.result.stdout == "done\n", (first.result.describe(), first.result.stderr)
    assert second.result.stdout == "OK\n", (second.result.describe(), second.result.stderr)
    assert second.started >= first.ended
