"""A checker's contract, declared once (``Checker``), is checked by the plugin's generated checks: each class
of a checker that breaks it is caught, and a checker that keeps it passes every one. The checkers here are
this file's own examples: a dump checker that caches its answer, one that marks its input, one that reads
its input from the lab root's folder, and their right twins. Runs go through the real sandbox."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpulab.grading import Case, Cases, Checker, GradingError, StepFailed
from pytest_gpulab.grading.scripts.contract import contract_checks
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox import confine

SANDBOX = confine.probe()
WITH, WITHOUT = "[runtimes.nvidia]\n", "[runtimes.runc]\n"
RIGHT = """#!/bin/sh
grep -q '^\\[runtimes.nvidia\\]' "$1" && { echo OK; exit 0; }
echo MISSING=nvidia; exit 1
"""
CACHES = """#!/bin/sh
cache="${TMPDIR:-/tmp}/answer"
[ -f "$cache" ] || { grep -q '^\\[runtimes.nvidia\\]' "$1" && echo OK >"$cache" || echo MISSING=nvidia >"$cache"; }
cat "$cache"; grep -q OK "$cache"
"""
CACHES_BY_ITS_ARGUMENT = CACHES.replace(
    'cache="${TMPDIR:-/tmp}/answer"', 'cache="$HOME/.answer-$(printf %s "$1" | md5sum | cut -c1-8)"'
)
SED_IN_PLACE = RIGHT.replace("#!/bin/sh\n", "#!/bin/sh\nsed -i 's/\\r$//' \"$1\" || exit 2\n")
FAILS = "#!/bin/sh\ncat /nonexistent/config.toml || exit 2\n"
MARKS = RIGHT.replace("#!/bin/sh\n", '#!/bin/sh\necho "# checked" >>"$1" 2>/dev/null\n')
CDS_FIRST = RIGHT.replace("#!/bin/sh\n", '#!/bin/sh\ncd "$(dirname "$0")" || exit 2\n')
CHECKER = Checker("bin/check.sh", args=("DUMP",), file_args=(0,))


@pytest.fixture
def cases_of(tmp_path: Path) -> Iterator:
    """The contract's cases for a checker of this text, run in the sandbox as a grading runs it."""
    runners: list[ScriptRunner] = []

    def make(text: str) -> Cases:
        root = tmp_path / f"lab-{len(runners)}"
        (root / "bin").mkdir(parents=True)
        (root / "bin/check.sh").write_text(text)
        (root / "bin/check.sh").chmod(0o755)
        dumps = root.parent / f"dumps-{len(runners)}"
        dumps.mkdir()
        (dumps / "without.toml").write_text(WITHOUT)
        (dumps / "with.toml").write_text(WITH)
        (dumps / "near.toml").write_text("[runtimes.nvidia-cdi]\n[runtimes.NVIDIA]\n")
        runner = ScriptRunner(tmp_path / f"work-{len(runners)}", 20.0, lambda: None, lab_root=root, sandbox=SANDBOX)
        runners.append(runner)
        return Cases(
            runner.runs_of(root / "bin/check.sh"),
            Case("Given a dump without nvidia", (str(dumps / "without.toml"),), expected=frozenset({"MISSING=nvidia"})),
            Case("Given a dump with nvidia", (str(dumps / "with.toml"),)),
            near_misses=Case(
                "Given a dump with nvidia-cdi and NVIDIA",
                (str(dumps / "near.toml"),),
                expected=frozenset({"MISSING=nvidia"}),
            ),
        )

    yield make
    for runner in runners:
        runner.close()


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


def outcome(check, cases: Cases, tmp_path: Path) -> str | None:
    """None when the generated check passes, else its sentence."""
    names = inspect.signature(check).parameters
    tmp_path.mkdir(parents=True, exist_ok=True)
    given = {"checker_cases": cases, "tmp_path": tmp_path, "feedback": Notes()}
    try:
        check(**{name: given[name] for name in names})
    except StepFailed as failure:
        return failure.message
    return None


def test_the_generated_checks_are_named_as_the_report_shows_them():
    names = [name for name, _ in contract_checks(CHECKER)]
    assert names == [
        "contract-only-reads",
        "contract-uses-its-argument",
        "contract-second-run",
        "contract-relative-path",
        "contract-near-misses",
    ]
    cluster = Checker("bin/gate.sh", finding="BLOCKED", reads_cluster=True)
    assert [name for name, _ in contract_checks(cluster)][:2] == [
        "contract-fails-closed-unavailable",
        "contract-fails-closed-unreachable",
    ]
    assert "only reads the cluster and the files" in Checker("x", reads_cluster=True, file_args=(0,)).contract()


def test_a_right_checker_keeps_every_generated_check(cases_of, tmp_path):
    cases = cases_of(RIGHT)
    for name, check in contract_checks(CHECKER):
        assert outcome(check, cases, tmp_path / name) is None, name


def test_a_checker_that_keeps_its_answer_between_runs_fails_the_second_run(cases_of, tmp_path):
    checks = dict(contract_checks(CHECKER))
    said = outcome(checks["contract-second-run"], cases_of(CACHES), tmp_path)
    assert said is not None and "on its second run" in said and "MISSING=nvidia" in said, said
    # alone, each of its runs is right: the fresh sandbox of each run hid it before
    assert outcome(checks["contract-relative-path"], cases_of(CACHES), tmp_path / "relative") is None


def test_a_failed_contract_check_notes_the_contract_for_the_summary(cases_of, tmp_path):
    notes = Notes()
    check = dict(contract_checks(CHECKER))["contract-only-reads"]
    with pytest.raises(StepFailed):
        check(checker_cases=cases_of(MARKS), feedback=notes)
    assert notes.notes == [f"bin/check.sh is held to this contract: {CHECKER.contract()}"]


def test_a_cache_keyed_by_its_argument_is_found_out_by_the_same_command_line_run_twice(cases_of, tmp_path):
    """The second run repeats the first's command line exactly (the dump's path too), the dump changed between."""
    assert CACHES_BY_ITS_ARGUMENT != CACHES
    said = outcome(dict(contract_checks(CHECKER))["contract-second-run"], cases_of(CACHES_BY_ITS_ARGUMENT), tmp_path)
    assert said is not None and "with the same arguments" in said and "MISSING=nvidia" in said, said


def test_a_checker_that_edits_its_input_in_place_fails_only_reads(cases_of, tmp_path):
    """sed -i writes a file beside its input and renames it over: the copy's folder is writable, so it shows."""
    said = outcome(dict(contract_checks(CHECKER))["contract-only-reads"], cases_of(SED_IN_PLACE), tmp_path)
    assert said is not None and "wrote into the file it was given" in said, said


def test_a_checker_that_fails_on_every_input_is_not_said_to_ignore_its_argument(cases_of, tmp_path):
    assert outcome(dict(contract_checks(CHECKER))["contract-uses-its-argument"], cases_of(FAILS), tmp_path) is None


def test_a_checker_that_writes_into_its_input_fails_only_reads(cases_of, tmp_path):
    said = outcome(dict(contract_checks(CHECKER))["contract-only-reads"], cases_of(MARKS), tmp_path)
    assert said is not None and "wrote into the file it was given" in said, said


def test_a_checker_that_cannot_take_a_relative_path_fails_relative_path(cases_of, tmp_path):
    checks = dict(contract_checks(CHECKER))
    said = outcome(checks["contract-relative-path"], cases_of(CDS_FIRST), tmp_path)
    assert said is not None and "relative path given/with.toml" in said, said
    assert outcome(checks["contract-second-run"], cases_of(CDS_FIRST), tmp_path / "second") is None


def test_a_checker_that_compares_names_loosely_fails_near_misses(cases_of, tmp_path):
    loose = RIGHT.replace("grep -q '^\\[runtimes.nvidia\\]'", "grep -qi 'runtimes.nvidia'")
    assert loose != RIGHT
    said = outcome(dict(contract_checks(CHECKER))["contract-near-misses"], cases_of(loose), tmp_path)
    assert said is not None and "nvidia-cdi and NVIDIA" in said, said


def test_a_step_that_gives_no_near_miss_case_is_the_grader_s_error(cases_of, tmp_path):
    cases = cases_of(RIGHT)
    bare = Cases(cases.runs, cases.findings, cases.other)
    with pytest.raises(GradingError, match="no near-miss case"):
        dict(contract_checks(CHECKER))["contract-near-misses"](checker_cases=bare, feedback=Notes())


def test_a_waived_check_says_why_in_the_report():
    notes: list[str] = []
    waived = Checker("bin/check.sh", args=("DUMP",), file_args=(0,), waive={"second-run": "it keeps no state"})
    check = dict(contract_checks(waived))["contract-second-run"]
    check(feedback=type("Feedback", (), {"note": staticmethod(notes.append)})())
    assert notes == ["Not checked for this step: it keeps no state"]
