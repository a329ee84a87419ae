"""The causes the scripts kit diagnoses from a checker's run (grading/scripts/diagnose.py), each from what the run
shows, and none where the run shows none: a hint is a diagnosis, never a default."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulab.grading.answers import decimal_suffix_hint, unresolved_path_hint
from pytest_gpulab.grading.feedback import StepFailed
from pytest_gpulab.grading.k8s import added_by_runtimeclass, misread_numbers, names_for_handlers
from pytest_gpulab.grading.parsing import misplaced
from pytest_gpulab.grading.scripts.diagnose import answered, diagnosis, exit_diagnosis, reads_its_arguments
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


def test_a_test_of_a_bare_word_is_named_with_its_line(tmp_path):
    result = ran(tmp_path, "#!/bin/bash\nfound=\nif [ -n nvidia_found ]; then exit 0; fi\nexit 1\n", exit_code=0)
    said = exit_diagnosis(result, should_succeed=False) or ""
    assert said.startswith("Line 3 tests the word nvidia_found itself")
    assert '"$nvidia_found"' in said
    quoted = ran(tmp_path, '#!/bin/bash\nif [ -n "$found" ]; then exit 0; fi  # [ -n found ]\nexit 1\n', exit_code=0)
    assert exit_diagnosis(quoted, should_succeed=False) is None


def test_a_script_that_reads_its_arguments_is_told_apart(tmp_path):
    assert reads_its_arguments(ran(tmp_path, '#!/bin/bash\nlimit="${1:-30}"\n'))
    assert reads_its_arguments(ran(tmp_path, "#!/bin/bash\nwhile getopts t: o; do :; done\n"))
    assert not reads_its_arguments(ran(tmp_path, "#!/bin/bash\nlimit=30  # use $1 later\necho ${#limit}\n"))


def test_a_key_written_elsewhere_is_named_where_it_is():
    sharing = {"sharing": {"failRequestsGreaterThanOne": True, "timeSlicing": {"resources": []}}}
    said = misplaced(sharing, "sharing", "timeSlicing", "failRequestsGreaterThanOne") or ""
    assert said.startswith("failRequestsGreaterThanOne is written at sharing.failRequestsGreaterThanOne")
    config = {"plugins": {"io.containerd.grpc.v1.cri": {"default_runtime_name": "runc", "containerd": {}}}}
    in_table = misplaced(
        config, "plugins", "io.containerd.grpc.v1.cri", "containerd", "default_runtime_name", toml=True
    )
    assert 'written in [plugins."io.containerd.grpc.v1.cri"], where' in (in_table or "")
    assert misplaced({"a": {"b": 1}}, "a", "b") is None  # where it belongs
    assert misplaced({"a": {}}, "a", "b") is None  # nowhere at all


def test_value_diagnoses_fire_only_on_their_cause():
    assert "powers of ten" in (decimal_suffix_hint("128M", "128Mi") or "")
    assert decimal_suffix_hint("128Mi", "128Mi") is None
    assert decimal_suffix_hint("256M", "128Mi") is None
    table = "NAME GPU\nlab-node-0   <none>\nlab-node-1 <none>\n"
    assert "nvidia\\.com/gpu" in (unresolved_path_hint(table, {"lab-node-0"}, "nvidia.com/gpu") or "")
    assert unresolved_path_hint("lab-node-0 4\nlab-node-1 <none>\n", {"lab-node-0"}, "nvidia.com/gpu") is None


def test_cluster_diagnoses_name_the_field_and_the_class():
    ds = {"status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "updatedNumberScheduled": 1}}
    hints = misread_numbers(ds, "updatedNumberScheduled")
    assert "status.currentNumberScheduled" in hints[3] and "status.desiredNumberScheduled" in hints[3]
    assert 1 not in hints
    classes = [
        {"metadata": {"name": "nvidia"}, "handler": "nvidia"},
        {"metadata": {"name": "typo"}, "handler": "nvidai"},
    ]
    hint = names_for_handlers(classes)
    assert "typo is a RuntimeClass name" in (hint({"MISSING=typo"}) or "")
    assert hint({"MISSING=nvidai"}) is None
    pod = {
        "spec": {"nodeSelector": {"gpu": "yes", "kubernetes.io/hostname": "b"}},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                   "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."}]},
    }  # fmt: skip
    runtimeclass = {"metadata": {"name": "over"}, "scheduling": {"nodeSelector": {"gpu": "yes"}}}
    assert "gpu=yes is not the Pod's own" in (added_by_runtimeclass(pod, runtimeclass) or "")
    assert added_by_runtimeclass(pod, {"metadata": {"name": "plain"}}) is None
