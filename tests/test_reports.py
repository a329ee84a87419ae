"""What learners and autograders get: outcomes, the grading report through every failure, Gradescope, JUnit."""

import json
import re
import signal
import xml.etree.ElementTree as ElementTree

import pytest

LAB_TOML = 'name = "mini"\ntitle = "Mini"\ndefault_root = "/nonexistent"\nrubric_version = "3"\n'

STEPS = {
    "step1_right": """
import pytest
pytestmark = pytest.mark.step(1, "Right", points=5)

def test_right():
    pass
""",
    "step2_wrong": """
import pytest
from pytest_gpulab.grading.feedback import fail
pytestmark = pytest.mark.step(2, "Wrong", points=10)

def test_wrong():
    fail("The thing should be 2, found 3.", hint="Count again.", detail={"found": 3})
""",
    "step3_needs_two": """
import pytest
from pytest_gpulab.grading.feedback import blocked_unless, fail
pytestmark = pytest.mark.step(3, "Needs two", points=7, needs=2)

def test_what_step_two_made():
    blocked_unless(False, "the ConfigMap lab/two, which step 2 makes,")

def test_a_later_check():
    fail("Misleading: there is no ConfigMap.")
""",
    "step4_bug": """
import pytest
pytestmark = pytest.mark.step(4, "Bug", points=3)

def test_bug():
    raise KeyError("oops")
""",
}


def mini_lab(pytester: pytest.Pytester, lab_toml: str = LAB_TOML, **modules: str):
    folder = pytester.mkdir("mini")
    (folder / "lab.toml").write_text(lab_toml)
    for name, text in (modules or STEPS).items():
        (folder / f"{name}.py").write_text(text)
    return folder


def grade(pytester, folder, *args):
    report = pytester.path / "grading.json"
    result = pytester.runpytest_subprocess(f"--lab-dir={folder}", f"--gpulab-report={report}", *args)
    return result, (json.loads(report.read_text()) if report.exists() else None)


def test_four_outcomes_each_with_its_sentence_in_the_report_and_the_table(pytester):
    result, report = grade(pytester, mini_lab(pytester))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert report["schema"] == "pytest-gpulab/report"
    assert report["schema_version"] == 1
    assert (report["lab"], report["rubric_version"], report["complete"], report["interrupted"]) == (
        "mini",
        "3",
        True,
        None,
    )
    assert (report["earned"], report["possible"], report["retry"]) == (5, 25, True)
    steps = {step["number"]: step for step in report["steps"]}
    assert {n: (s["outcome"], s["earned"], s["points"]) for n, s in steps.items()} == {
        1: ("passed", 5, 5),
        2: ("failed", 0, 10),
        3: ("blocked", 0, 7),
        4: ("error", 0, 3),
    }
    wrong = steps[2]["checks"][0]
    assert (wrong["id"], wrong["message"], wrong["hint"], wrong["detail"]) == (
        "mini.2.wrong",
        "The thing should be 2, found 3.",
        "Count again.",
        {"found": 3},
    )
    assert steps[4]["checks"][0]["error"] == "KeyError: 'oops'"
    assert "not your mistake" in steps[4]["message"]
    result.stdout.fnmatch_lines(
        [
            "step  title * points  outcome",
            "   1  Right * 5/5  passed",
            "   2  Wrong * 0/10  failed",
            "        The thing should be 2, found 3. Hint: Count again.",
            "   3  Needs two * 0/7  blocked",
            "   4  Bug * 0/3  error",
            "total: 5/25 points · lab mini · rubric 3 · seed *",
        ]
    )
    assert all(len(line) <= 80 for line in result.stdout.str().split("step  title", 1)[1].splitlines())


def test_a_blocked_step_names_its_root_cause_and_says_nothing_misleading(pytester):
    result, report = grade(pytester, mini_lab(pytester))
    blocked = report["steps"][2]
    assert blocked["message"] == (
        "Blocked by step 2: The ConfigMap lab/two, which step 2 makes, is missing. "
        "Because step 2 failed: The thing should be 2, found 3."
    )
    assert blocked["blocked_by"] == [2]
    assert blocked["earned"] == 0
    assert [c["outcome"] for c in blocked["checks"]] == ["blocked", "blocked"]
    assert "Misleading" not in json.dumps(report)
    assert "Misleading" not in result.stdout.str()
    assert "2 blocked" in result.stdout.lines[-1]


def test_a_blocked_step_graded_alone_says_the_step_it_needs_was_not_graded(pytester):
    result, report = grade(pytester, mini_lab(pytester), "--step", "3")
    assert [s["outcome"] for s in report["steps"]] == ["not graded", "not graded", "blocked", "not graded"]
    assert "Because step 2 was not graded in this run; grade it too (--step 2-3)." in report["steps"][2]["message"]
    assert report["complete"] is True
    assert report["steps_chosen"] == "3"
    result.stdout.fnmatch_lines(["   1  Right * -/5  not graded", "total: 0/25 points (steps 1, 2, 4 not graded)*"])


@pytest.mark.parametrize(("chosen", "graded"), [("1", [1]), ("2-3", [2, 3]), ("1,3-4", [1, 3, 4]), (" 4 , 1 ", [1, 4])])
def test_one_step_at_a_time(pytester, chosen, graded):
    _, report = grade(pytester, mini_lab(pytester), f"--step={chosen}")
    assert [s["number"] for s in report["steps"] if s["outcome"] != "not graded"] == graded


@pytest.mark.parametrize(
    ("chosen", "says"),
    [("x", "steps are numbers and ranges"), ("3-1", "runs backwards"), ("9", "chooses step 9, and the lab has steps")],
)
def test_a_bad_step_choice_is_a_usage_error_saying_where_it_came_from(pytester, chosen, says):
    result, _ = grade(pytester, mini_lab(pytester), f"--step={chosen}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
    assert "the option --step" in result.stderr.str()


def test_step_touches_nothing_the_step_does_not_need(pytester):
    """The real gpuop graders, step 1 only, with no cluster at all: nothing of the cluster steps runs."""
    report = pytester.path / "grading.json"
    root = pytester.mkdir("learner")
    result = pytester.runpytest_subprocess(
        "--lab=gpuop", f"--lab-root={root}", "--kubeconfig=/nonexistent", "--step=1", f"--gpulab-report={report}"
    )
    outcomes = [step["outcome"] for step in json.loads(report.read_text())["steps"]]
    assert outcomes == ["failed"] + ["not graded"] * 7
    assert "Could not reach" not in result.stdout.str()


def test_an_unreachable_cluster_is_an_error_of_exactly_the_cluster_steps(pytester):
    report = pytester.path / "grading.json"
    root = pytester.mkdir("learner")
    pytester.runpytest_subprocess(
        "--lab=gpuop", f"--lab-root={root}", "--kubeconfig=/nonexistent", f"--gpulab-report={report}"
    )
    data = json.loads(report.read_text())
    assert {s["number"]: s["outcome"] for s in data["steps"]} == {
        **{n: "failed" for n in (1, 2, 3, 4)},  # files and scripts: the learner's, graded without a cluster
        **{n: "error" for n in (5, 6, 7, 8)},
    }
    assert data["retry"] is True
    assert all(s["message"].startswith("Could not reach") for s in data["steps"][4:])


SLOW = """
import time
import pytest
pytestmark = pytest.mark.step({number}, "Slow", points=1{timeout})

def test_slow():
    time.sleep({seconds})  # a grader that hangs, standing in for a stuck API call
"""


def test_a_check_out_of_time_is_an_error_of_its_step_only(pytester):
    lab_toml = LAB_TOML + "check_timeout = 1\n"
    folder = mini_lab(
        pytester,
        lab_toml,
        step1_slow=SLOW.format(number=1, timeout="", seconds=30),
        step2_given_longer=SLOW.format(number=2, timeout=", timeout=20", seconds=2),
        step3_right=STEPS["step1_right"].replace("step(1,", "step(3,"),
    )
    _, report = grade(pytester, folder)
    steps = report["steps"]
    assert [s["outcome"] for s in steps] == ["error", "passed", "passed"]
    assert "took longer than its 1.0 seconds" in steps[0]["message"]
    assert report["retry"] is True


def test_a_grader_killed_outright_leaves_the_incomplete_report(pytester):
    steps = {
        "step1_right": STEPS["step1_right"],
        "step2_killed": f"""
import os
import pytest
pytestmark = pytest.mark.step(2, "Killed", points=10)

def test_killed():
    os.kill(os.getpid(), {int(signal.SIGKILL)})
""",
        "step3_after": STEPS["step1_right"].replace("step(1,", "step(3,"),
    }
    result, report = grade(pytester, mini_lab(pytester, **steps))
    assert result.ret == -signal.SIGKILL
    assert report["complete"] is False
    assert [s["outcome"] for s in report["steps"]] == ["passed", "not graded", "not graded"]


def test_sigterm_writes_the_report_and_stops_as_interrupted(pytester):
    steps = {
        "step1_right": STEPS["step1_right"],
        "step2_term": f"""
import os
import pytest
pytestmark = pytest.mark.step(2, "Term", points=10)

def test_term():
    os.kill(os.getpid(), {int(signal.SIGTERM)})
""",
    }
    result, report = grade(pytester, mini_lab(pytester, **steps))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (report["complete"], report["interrupted"]) == (False, "SIGTERM")
    assert report["steps"][0]["outcome"] == "passed"


def test_keyboard_interrupt_leaves_an_incomplete_report(pytester):
    steps = {
        "step1_right": STEPS["step1_right"],
        "step2_stop": 'import pytest\npytestmark = pytest.mark.step(2, "Stop")\n\ndef test_stop():\n    raise KeyboardInterrupt\n',
    }
    result, report = grade(pytester, mini_lab(pytester, **steps))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (report["complete"], report["interrupted"]) == (False, "interrupted")
    assert report["steps"][0]["outcome"] == "passed"


@pytest.mark.parametrize("json_report", ["absent", "failing"])
def test_the_report_does_not_depend_on_pytest_json_report(pytester, json_report):
    folder = mini_lab(pytester)
    if json_report == "absent":
        args = ["-p", "no:pytest_jsonreport"]
    else:
        (pytester.path / "a-file").write_text("")
        args = ["--json-report", f"--json-report-file={pytester.path / 'a-file' / 'report.json'}"]
    _, report = grade(pytester, folder, *args)
    assert report["complete"] is True
    assert [s["outcome"] for s in report["steps"]][:2] == ["passed", "failed"]


GRADESCOPE_TOP = {"score", "execution_time", "output", "visibility", "stdout_visibility", "tests"}
GRADESCOPE_TEST = {"name", "number", "score", "max_score", "status", "output", "tags", "visibility", "extra_data"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def test_gradescope_results_follow_the_autograder_format(pytester):
    results = pytester.path / "results.json"
    grade(pytester, mini_lab(pytester), f"--gradescope-results={results}")
    data = json.loads(results.read_text())
    assert set(data) <= GRADESCOPE_TOP
    assert {"score", "execution_time", "tests"} <= set(data)
    assert data["score"] == 5.0
    assert data["execution_time"] >= 0
    assert data["visibility"] in VISIBILITIES
    tests = data["tests"]
    assert [t["number"] for t in tests] == ["1.1", "2.1", "3.1", "3.2", "4.1"]
    for test in tests:
        assert set(test) <= GRADESCOPE_TEST
        assert {"name", "number", "score", "max_score", "status"} <= set(test)
        assert re.fullmatch(r"\d+\.\d+", test["number"])
        assert test["status"] in {"passed", "failed"}
        assert 0 <= test["score"] <= test["max_score"]
        assert test["visibility"] in VISIBILITIES
        assert isinstance(test["output"], str)
        assert isinstance(test["name"], str)
    assert sum(t["max_score"] for t in tests) == pytest.approx(25)
    assert tests[1]["output"] == "The thing should be 2, found 3. Hint: Count again."
    assert [t["extra_data"]["outcome"] for t in tests] == ["passed", "failed", "blocked", "blocked", "error"]


def test_junit_testcases_carry_lab_step_check_points_and_outcome(pytester):
    junit = pytester.path / "junit.xml"
    grade(pytester, mini_lab(pytester), f"--junitxml={junit}")
    cases = {case.get("name"): case for case in ElementTree.parse(junit).iter("testcase")}  # named by check
    properties = {name: {p.get("name"): p.get("value") for p in case.iter("property")} for name, case in cases.items()}
    assert properties["wrong"] == {
        "gpulab_lab": "mini",
        "gpulab_step": "2",
        "gpulab_check": "mini.2.wrong",
        "gpulab_outcome": "failed",
        "gpulab_points": "0/10",
    }
    assert properties["right"]["gpulab_outcome"] == "passed"
    assert properties["right"]["gpulab_points"] == "5/5"
    assert properties["bug"]["gpulab_outcome"] == "error"
