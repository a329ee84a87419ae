"""The causes the scripts kit diagnoses from a checker's run (grading/scripts/diagnose.py), each from what the run
shows, and none where the run shows none: a hint is a diagnosis, never a default."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulab.grading.feedback import StepFailed
from pytest_gpulab.grading.scripts.diagnose import answered, diagnosis
from pytest_gpulab.grading.scripts.verdicts import expect_verdict
from pytest_gpulab.sandbox.script_result import ScriptResult

TWO = {"MISSING=a/x", "MISSING=b/y"}


def ran(
    tmp_path: Path, text: str, *, stdout: str = "", stderr: str = "", exit_code: int | None = 1, **more
) -> ScriptResult:
    script = tmp_path / "check.sh"
    script.write_text(text)
    return ScriptResult(
        command=[str(script)], exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=False, flooded=False,
        ran_with_bash=False, duration=0.1, **more,
    )  # fmt: skip


def test_bash_syntax_under_sh_names_dash(tmp_path):
    result = ran(tmp_path, "#!/bin/sh\nif [[ -n $x ]]; then echo OK; fi\n", stderr="check.sh: 2: [[: not found\n")
    assert "dash" in (diagnosis(result, TWO, set()) or "")
    assert "#!/usr/bin/env bash" in (diagnosis(result, TWO, set()) or "")


def test_a_syntax_error_bash_names_is_quoted(tmp_path):
    result = ran(
        tmp_path,
        "#!/bin/bash\nfor x in; do\n",
        stderr="check.sh: line 2: syntax error near unexpected token `do'\n",
        exit_code=2,
    )
    said = diagnosis(result, TWO, set()) or ""
    assert said.startswith("bash could not read it: line 2: syntax error")


def test_a_silent_end_under_set_e_names_the_command(tmp_path):
    text = "#!/bin/bash\nset -euo pipefail\nn=0\nfor d in a b; do\n  ((n++))\n  echo MISSING=$d/x\ndone\n"
    result = ran(tmp_path, text, stdout="")
    said = diagnosis(result, TWO, set()) or ""
    assert "set -e" in said and "((n++))" in said


def test_a_silent_end_without_set_e_is_not_blamed_on_it(tmp_path):
    result = ran(tmp_path, "#!/bin/bash\nn=0\n((n++))\n", stdout="")
    assert diagnosis(result, TWO, set()) is None


def test_the_first_item_of_a_list(tmp_path):
    text = '#!/bin/bash\nblocked=(a b)\necho "MISSING=${blocked[0]}"\nexit 1\n'
    result = ran(tmp_path, text, stdout="MISSING=a/x\n")
    assert "first item of a list (line 3" in (diagnosis(result, TWO, {"MISSING=a/x"}) or "")


def test_an_exit_after_the_first_finding(tmp_path):
    text = "#!/usr/bin/env python3\nimport sys\nfor h in missing:\n    print(f'MISSING={h}')\n    sys.exit(1)\n"
    result = ran(tmp_path, text, stdout="MISSING=a/x\n")
    assert "stops after its first finding" in (diagnosis(result, TWO, {"MISSING=a/x"}) or "")


def test_one_finding_of_two_with_no_reason_in_the_text_is_not_diagnosed(tmp_path):
    result = ran(tmp_path, "#!/bin/bash\necho MISSING=a/x\nexit 1\n", stdout="MISSING=a/x\n")
    assert diagnosis(result, TWO, {"MISSING=a/x"}) is None


def test_the_right_findings_with_the_wrong_exit(tmp_path):
    result = ran(tmp_path, "#!/bin/bash\n", stdout="MISSING=a/x\nMISSING=b/y\n", exit_code=2)
    assert (
        diagnosis(result, TWO, TWO)
        == "Its findings are right, but it exited 2: a checker that finds a problem exits 1."
    )


def test_a_signal(tmp_path):
    result = ran(tmp_path, "#!/bin/bash\nkill -SEGV $$\n", exit_code=None, signal=11)
    assert diagnosis(result, TWO, set()) == "It was killed by SIGSEGV before it finished, so its answer is incomplete."
    assert not answered(result)


def test_a_step_hint_is_not_given_to_a_run_that_did_not_answer(tmp_path):
    """A run that crashed (exit 2, a syntax error) gets the diagnosis or nothing, never the step's own hint."""
    result = ran(tmp_path, "#!/bin/bash\n", stdout="", stderr="boom\n", exit_code=2)
    with pytest.raises(StepFailed) as failed:
        expect_verdict(result, "bin/check.sh", "Run on ns", TWO, prefix="MISSING", hint=lambda _: "STEP HINT")
    assert failed.value.hint is None


def test_a_step_hint_is_given_to_a_run_that_answered(tmp_path):
    result = ran(tmp_path, "#!/bin/bash\n", stdout="OK\n", exit_code=0)
    with pytest.raises(StepFailed) as failed:
        expect_verdict(result, "bin/check.sh", "Run on ns", TWO, prefix="MISSING", hint=lambda _: "STEP HINT")
    assert failed.value.hint == "STEP HINT"


def test_an_exit_status_checker_ended_by_a_counter_under_set_e(tmp_path):
    from pytest_gpulab.grading.scripts.diagnose import exit_diagnosis

    text = "#!/bin/bash\nset -e\nfound=0\nfor r in a b; do ((found++)); done\n[ $found -gt 0 ]\n"
    result = ran(tmp_path, text, exit_code=1)
    said = exit_diagnosis(result, should_succeed=True) or ""
    assert "set -e" in said and "((n++))" in said
    assert exit_diagnosis(result, should_succeed=False) is None  # exiting 1 is then the right answer
