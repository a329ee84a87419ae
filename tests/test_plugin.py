"""The plugin's options, markers and reporting, through pytester (no cluster needed)."""

import json

import pytest

GRADER = """
import pytest
from pytest_gpulab.grading.feedback import fail

pytestmark = pytest.mark.step(3, "A wrong answer", points=7)

def test_wrong(feedback):
    feedback.note("a note for the learner")
    fail("MAIN_RUNTIMES should be runc, found 'nvidia'.", hint="Read the file.", detail={"found": "nvidia"})

@pytest.mark.step(4, "A grader bug", points=2)
def test_bug():
    raise KeyError("oops")

@pytest.mark.step(5, "Fine", points=1)
def test_fine():
    pass
"""


def test_unknown_lab_is_a_usage_error_listing_the_labs(pytester):
    result = pytester.runpytest_subprocess("--lab", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown lab 'nope'; the labs found are: *gpuop*", "*came from the option --lab*"])


def test_help_lists_the_options_without_touching_a_cluster(pytester, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*--lab=*", "*--lab-dir=*", "*--lab-root=*", "*--kubeconfig=*", "*--lab-cluster=*", "*--script-timeout=*"]
    )


def test_lab_collects_its_graders_from_any_directory(pytester):
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"gpuop/step-{n}::*" for n in range(1, 9)] + ["* tests collected*"])
    assert "step1_main_config" not in result.stdout.str()


@pytest.mark.parametrize(
    ("ini", "env", "option", "expected"),
    [
        ("/from/ini", None, None, "/from/ini"),
        ("/from/ini", "/from/env", None, "/from/env"),
        ("/from/ini", "/from/env", "/from/option", "/from/option"),
        (None, None, None, "/root/gpuop"),
    ],
)
def test_lab_root_precedence_ini_env_option(pytester, monkeypatch, ini, env, option, expected):
    if ini:
        pytester.makeini(f"[pytest]\ngpulab_lab_root = {ini}\n")
    if env:
        monkeypatch.setenv("GPULAB_LAB_ROOT", env)
    else:
        monkeypatch.delenv("GPULAB_LAB_ROOT", raising=False)
    pytester.makepyfile(
        test_root=f"def test_root(gpulab_settings):\n    assert str(gpulab_settings.lab_root) == {expected!r}\n"
    )
    args = ["--lab", "gpuop", "test_root.py"] + (["--lab-root", option] if option else [])
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)


def test_bad_script_timeout_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--script-timeout", "soon", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*the option --script-timeout is 'soon'; the script timeout must be a positive number of seconds*"]
    )


def test_invalid_step_marker_names_the_test_and_the_signature(pytester):
    pytester.makepyfile(test_bad='import pytest\n\n@pytest.mark.step("one", "t")\ndef test_x():\n    pass\n')
    result = pytester.runpytest_subprocess("--lab", "gpuop", "test_bad.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*test_bad.py::test_x: invalid step marker: the step number must be a positive integer*step(number, title, points=1, *, needs=(), timeout=None)*"
        ]
    )


def test_wrong_answer_is_a_sentence_and_the_report_carries_the_step(pytester):
    pytester.makepyfile(test_grader=GRADER)
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_grader.py", "--json-report", f"--json-report-file={report_path}"
    )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    output = result.stdout.str()
    assert "MAIN_RUNTIMES should be runc, found 'nvidia'. Hint: Read the file." in output
    wrong_section = output.split("test_wrong")[1].split("test_bug")[0]
    assert "Traceback" not in wrong_section
    assert "raise StepFailed" not in wrong_section
    assert "def test_wrong" not in wrong_section
    assert "KeyError" in output  # a grader bug keeps its traceback for the author
    result.stdout.fnmatch_lines(
        [
            "   3  A wrong answer * 0/7  failed",
            "        MAIN_RUNTIMES should be runc, found 'nvidia'. Hint: Read the file.",
            "   4  A grader bug * 0/2  error",
            "        The grader itself failed on this check; this is not your mistake.*",
            "   5  Fine * 1/1  passed",
            "*total: 1/10 points*",
            "*note on step 3: a note for the learner*",
        ]
    )

    report = json.loads(report_path.read_text())
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    wrong = tests["test_wrong"]["metadata"]
    assert wrong == {
        "lab": "gpuop",
        "step": 3,
        "title": "A wrong answer",
        "points": 7,
        "check": "gpuop.3.wrong",
        "notes": ["a note for the learner"],
        "feedback": "MAIN_RUNTIMES should be runc, found 'nvidia'.",
        "hint": "Read the file.",
        "detail": {"found": "nvidia"},
        "internal_error": False,
        "outcome": "failed",
    }
    assert (
        tests["test_wrong"]["call"]["longrepr"] == "MAIN_RUNTIMES should be runc, found 'nvidia'. Hint: Read the file."
    )
    assert tests["test_bug"]["metadata"]["internal_error"] is True
    assert tests["test_bug"]["metadata"]["error"] == "KeyError: 'oops'"
    assert tests["test_fine"]["metadata"] == {
        "lab": "gpuop",
        "step": 5,
        "title": "Fine",
        "points": 1,
        "check": "gpuop.5.fine",
        "outcome": "passed",
    }
    assert report["gpulab"]["earned"] == 1
    assert report["gpulab"]["possible"] == 10
    assert [(s["number"], s["earned"], s["outcome"]) for s in report["gpulab"]["steps"]] == [
        (3, 0, "failed"),
        (4, 0, "error"),
        (5, 1, "passed"),
    ]


def test_unreachable_cluster_is_an_error_of_live_steps_with_a_message(pytester):
    pytester.makepyfile(test_live='import pytest\n\n@pytest.mark.step(6, "Live")\ndef test_live(live):\n    pass\n')
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_live.py", "--kubeconfig", str(pytester.path / "missing")
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*Could not reach the lab cluster (kubeconfig *missing): the kubeconfig*could not be loaded*gpulab up gpuop*"]
    )


def test_a_step_of_several_tests_earns_its_points_only_when_all_pass(pytester):
    pytester.makepyfile(
        test_split="""
import pytest
from pytest_gpulab.grading.feedback import fail
pytestmark = pytest.mark.step(2, "Two checks", points=10)

def test_first():
    pass

def test_second():
    fail("Wrong.")
"""
    )
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_split.py", "--json-report", f"--json-report-file={report_path}"
    )
    result.stdout.fnmatch_lines(["   2  Two checks * 0/10  failed", "        second: Wrong.", "total: 0/10 points*"])
    steps = json.loads(report_path.read_text())["gpulab"]["steps"]
    assert [(s["number"], s["earned"], [c["outcome"] for c in s["checks"]]) for s in steps] == [
        (2, 0, ["passed", "failed"])
    ]


def test_a_missing_lab_directory_is_one_clear_sentence(pytester):
    pytester.makepyfile(test_root='import pytest\n\n@pytest.mark.step(1, "Root")\ndef test_root(lab_root):\n    pass\n')
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_root.py", "--lab-root", str(pytester.path / "nowhere")
    )
    result.assert_outcomes(failed=1)  # the learner's to fix, not an error of the grader
    result.stdout.fnmatch_lines(
        [
            "*The lab directory */nowhere does not exist. Do the lab there, or point the grader at your directory with --lab-root PATH.*"
        ]
    )


def test_settings_are_never_taken_from_the_learners_directory(pytester, tmp_path):
    root = tmp_path / "learner"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\naddopts = -k step1\n")
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--lab-root", str(root), "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*would take its settings from {root}/pytest.ini, inside the learner's directory*"])


@pytest.mark.parametrize("form", ["space", "equals", "cwd"])
def test_grading_writes_nothing_into_the_learners_directory(pytester, form):
    root = pytester.path  # the run starts here, as a learner in their lab directory would
    if form == "space":
        args = ["--lab-root", str(root)]
    elif form == "equals":
        args = [f"--lab-root={root}"]
    else:
        args = ["--lab-root", "."]
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--kubeconfig", str(root / "missing"), *args)
    result.stdout.fnmatch_lines(["total: 0/100 points*"])
    written = {p.name for p in root.iterdir()} - {"stdout", "stderr"} - {p.name for p in root.glob("runpytest-*")}
    assert written == set()  # pytester's own records aside: no .pytest_cache, nothing else


@pytest.mark.parametrize("where", ["lab-root", "cwd"])
def test_a_learners_conftest_is_never_imported(pytester, tmp_path, where):
    learner = pytester.path if where == "cwd" else tmp_path / "learner"
    learner.mkdir(exist_ok=True)
    ran = tmp_path / "conftest-ran"
    (learner / "conftest.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", f"--lab-root={learner}", "--kubeconfig", str(tmp_path / "missing")
    )
    assert not ran.exists()
    if where == "cwd":  # pytest would import it before any collection: grading refuses to start there
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"*pytest would import {learner}/conftest.py, inside the learner's directory*another directory*"]
        )
    else:
        result.stdout.fnmatch_lines(["total: 0/100 points*"])


def test_noconftest_grades_from_a_learners_directory_with_a_conftest(pytester, tmp_path):
    ran = tmp_path / "conftest-ran"
    (pytester.path / "conftest.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", f"--lab-root={pytester.path}", "--noconftest", "--kubeconfig", str(tmp_path / "missing")
    )
    result.stdout.fnmatch_lines(["total: 0/100 points*"])
    assert not ran.exists()


def test_steps_that_never_ran_still_count_as_possible(pytester):
    pytester.makepyfile(test_grader=GRADER)
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_grader.py", "-x", "--json-report", f"--json-report-file={report_path}"
    )
    result.stdout.fnmatch_lines(
        ["   3  A wrong answer * 0/7  failed", "   4  A grader bug * -/2  not graded", "   5  Fine * -/1  not graded",
         "total: 0/10 points (steps 4, 5 not graded)*"]
    )  # fmt: skip
    summary = json.loads(report_path.read_text())["gpulab"]
    assert (summary["possible"], summary["possible_graded"], summary["complete"]) == (10, 7, False)


def test_any_detail_is_recorded_and_the_report_is_written(pytester):
    pytester.makepyfile(
        test_odd="""
import datetime
import pytest
from pytest_gpulab.grading.feedback import fail

@pytest.mark.step(1, "Odd detail")
def test_odd():
    nested = {}
    node = nested
    for _ in range(100):
        node["next"] = node = {}
    fail("Wrong.", detail={datetime.date(2024, 1, 1): {1: object()}, "deep": nested, "big": "x" * 50000})
"""
    )
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_odd.py", "--json-report", f"--json-report-file={report_path}"
    )
    result.assert_outcomes(failed=1)
    metadata = json.loads(report_path.read_text())["tests"][0]["metadata"]
    assert metadata["feedback"] == "Wrong."
    assert metadata["internal_error"] is False
    assert isinstance(metadata["detail"], str)
    assert metadata["detail"].endswith("...(cut)")
    assert '"2024-01-01"' in metadata["detail"]


def test_learner_scripts_get_the_cluster_only_when_a_step_asks(tmp_path, monkeypatch):
    from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
    from pytest_gpulab.sandbox.containerd import FakeContainerd

    monkeypatch.delenv("KUBECONFIG", raising=False)
    script = tmp_path / "show.sh"
    script.write_text('#!/bin/sh\necho "KUBECONFIG=${KUBECONFIG:-}"\ncommand -v containerd\n')
    script.chmod(0o755)
    fake = FakeContainerd(tmp_path / "fake")
    runner = ScriptRunner(tmp_path / "work", 10, lambda: str(tmp_path / "kubeconfig"))
    plain = runner.run(script, fake=fake)
    assert plain.result.stdout.splitlines() == ["KUBECONFIG=", str(fake.bin_dir / "containerd")]
    with_cluster = runner.run(script, fake=fake, cluster=True)
    assert with_cluster.result.stdout.splitlines()[0] == f"KUBECONFIG={tmp_path / 'kubeconfig'}"


def test_a_script_that_needs_an_unreachable_cluster_is_an_error_not_a_wrong_answer(pytester, tmp_path):
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/sh\necho OK\n")
    script.chmod(0o755)
    pytester.makepyfile(
        test_scripts=f"""
import pytest
from pathlib import Path

@pytest.mark.step(1, "Scripts")
def test_scripts(learner_script):
    learner_script.run(Path({str(script)!r}), cluster=True)
"""
    )
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess(
        "--lab", "gpuop", "test_scripts.py", "--kubeconfig", str(tmp_path / "missing"), f"--gpulab-report={report}"
    )
    result.assert_outcomes(errors=1)
    step = json.loads(report.read_text())["steps"][0]
    assert step["outcome"] == "error"
    assert step["message"].startswith("Could not reach the lab cluster")


def test_a_bad_setting_names_where_it_came_from(pytester, monkeypatch):
    monkeypatch.setenv("GPULAB_LAB_CLUSTER", "bogus")
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*the environment variable GPULAB_LAB_CLUSTER is 'bogus'; lab-cluster is one of existing, ephemeral*"]
    )
    monkeypatch.delenv("GPULAB_LAB_CLUSTER")
    ini = pytester.makeini("[pytest]\ngpulab_script_timeout = soon\n")
    result = pytester.runpytest_subprocess("--lab", "gpuop", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*the ini setting gpulab_script_timeout in {ini} is not valid*"])


def test_the_header_says_where_each_setting_came_from(pytester, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "kubeconfig"))
    pytester.makeini(f"[pytest]\ngpulab_lab_root = {pytester.path / 'learner'}\n")
    result = pytester.runpytest_subprocess("--lab=gpuop", "--collect-only")
    result.stdout.fnmatch_lines(
        [
            "gpulab: lab gpuop (rubric *) from */graders/gpuop [[]the option --lab[]]",
            f"gpulab: learner root {pytester.path / 'learner'} [[]the ini setting gpulab_lab_root in *[]]",
            f"gpulab: cluster {pytester.path}/kubeconfig [[]the environment variable KUBECONFIG[]]",
        ]
    )


def test_a_lab_folder_is_graded_without_lab(pytester, tmp_path):
    from pytest_gpulab.labs import discover

    folder = discover().get("gpuop").folder
    result = pytester.runpytest_subprocess(
        str(folder), f"--lab-root={tmp_path}", "--kubeconfig", str(tmp_path / "missing")
    )
    result.stdout.fnmatch_lines(["*gpuop/step-1 *", "*lab gpuop: *", "total: 0/100 points*rubric*"])


LAB_TOML = 'name = "mini"\ntitle = "Mini"\ndefault_root = "/nonexistent"\nrubric_version = "1"\n'


def mini_lab(pytester: pytest.Pytester, **modules: str):
    folder = pytester.mkdir("mini")
    (folder / "lab.toml").write_text(LAB_TOML)
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    (folder / "helpers.py").write_text("raise AssertionError('a helper module is not collected')\n")
    return folder


def test_checks_with_their_own_points_earn_them_one_by_one(pytester):
    folder = mini_lab(
        pytester,
        step1_split="""
import pytest
pytestmark = pytest.mark.step(1, "Split")

@pytest.mark.check(points=3)
def test_right():
    pass

@pytest.mark.check("renamed", points=4)
def test_wrong():
    from pytest_gpulab.grading.feedback import fail
    fail("Wrong.")
""",
    )
    report_path = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        f"--lab-dir={folder}", "--json-report", f"--json-report-file={report_path}", "-v"
    )
    result.stdout.fnmatch_lines(
        ["mini/step-1::right PASSED*", "mini/step-1::renamed FAILED*", "   1  Split * 3/7  failed"]
    )
    step = json.loads(report_path.read_text())["gpulab"]["steps"][0]
    assert (step["earned"], step["points"]) == (3, 7)
    assert [(c["id"], c["outcome"], c["points"]) for c in step["checks"]] == [
        ("mini.1.right", "passed", 3),
        ("mini.1.renamed", "failed", 4),
    ]


@pytest.mark.parametrize(
    ("module", "says"),
    [
        (
            'import pytest\npytestmark = pytest.mark.step(2, "Two")\ndef test_x():\n    pass\n',
            "step1_x.py is marked step 2",
        ),
        (
            'import pytest\npytestmark = pytest.mark.step(1, "One", points=9)\n'
            "@pytest.mark.check(points=3)\ndef test_x():\n    pass\n",
            "marked points=9 but its checks' points add up to 3",
        ),
        (
            'import pytest\npytestmark = pytest.mark.step(1, "One")\n'
            "@pytest.mark.check(points=3)\ndef test_x():\n    pass\ndef test_y():\n    pass\n",
            "some checks carry points and mini.1.y does not",
        ),
        (
            'import pytest\npytestmark = pytest.mark.step(1, "One")\n@pytest.mark.check("Bad Name")\ndef test_x():\n    pass\n',
            "invalid check marker",
        ),
        (
            'import pytest\npytestmark = pytest.mark.step(1, "One", needs=1)\ndef test_x():\n    pass\n',
            "needs names earlier steps by number",
        ),
        (
            'import pytest\npytestmark = pytest.mark.step(1, "One", timeout="soon")\ndef test_x():\n    pass\n',
            "timeout is a positive number of seconds",
        ),
    ],
)
def test_an_authors_marker_mistake_is_a_usage_error(pytester, module, says):
    folder = mini_lab(pytester, step1_x=module)
    result = pytester.runpytest_subprocess(f"--lab-dir={folder}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()


def test_a_step_needing_a_step_the_lab_lacks_is_a_usage_error(pytester):
    module = 'import pytest\npytestmark = pytest.mark.step(3, "Three", needs=2)\ndef test_x():\n    pass\n'
    folder = mini_lab(pytester, step3_x=module)
    result = pytester.runpytest_subprocess(f"--lab-dir={folder}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "step 3 needs step 2, which the lab does not have; its steps are 3." in result.stderr.str()
