"""The evidence behind each verdict (pytest_gpulab/grading/evidence.py, reports/evidence.py): what a check read,
recorded by the kits, bounded, with nothing hidden shown; and each lab's reference grading, every check of which
has some."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from grading import solve

from pytest_gpulab.cli import main
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.grading import evidence, quoting
from pytest_gpulab.grading.feedback import StepFailed
from pytest_gpulab.grading.learner import LearnerWork
from pytest_gpulab.grading.parsing import dig
from pytest_gpulab.grading.scripts import record
from pytest_gpulab.labs.discovery import discover
from pytest_gpulab.labs.labfile import LabFileError, load_lab
from pytest_gpulab.labs.nearmisses import hidden_names, near_misses_in
from pytest_gpulab.reports.evidence import ANY_KIND, REPORT_LIMIT, bounded, step_reads
from pytest_gpulab.sandbox.script_result import ScriptResult

GRADERS = Path(__file__).resolve().parents[1] / "graders"


def test_a_file_is_quoted_by_its_head_and_a_link_out_or_a_fifo_is_never_read(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "merge.txt").write_text("".join(f"KEY{n}=" + "v" * 300 + "\n" for n in range(40)))
    os.mkfifo(tmp_path / "out" / "pipe.txt")
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.write_text("TOP-SECRET\n")
    (tmp_path / "out" / "link.txt").symlink_to(secret)
    work = LearnerWork(tmp_path)
    with evidence.recording(evidence.Evidence()) as seen:
        work.file("out/merge.txt").key_values()
        work.file("out/link.txt").exists()
        assert work.file("out/pipe.txt").exists() is False
        work.file("out/missing.txt").exists()
    shown = seen.as_json()
    merge = next(entry for entry in shown if entry["file"] == "out/merge.txt")
    assert merge["cut"] and len(merge["lines"]) <= quoting.LINES
    assert all(len(line) < quoting.LINE_CHARS + 20 for line in merge["lines"])
    assert {entry["file"] for entry in shown} == {"out/merge.txt", "out/pipe.txt", "out/missing.txt"}
    assert [entry.get("exists") for entry in shown[1:]] == [False, False]
    assert "TOP-SECRET" not in json.dumps(shown)


def test_fields_read_with_dig_are_kept_on_the_object_even_for_a_later_check():
    node = {"kind": "Node", "metadata": {"name": "lab-node-0", "resourceVersion": "42"}, "status": {"capacity": {}}}
    ledger = evidence.Ledger()
    with evidence.recording(evidence.Evidence(ledger)):
        evidence.note_object("Node", node)
    with evidence.recording(evidence.Evidence(ledger)) as later:
        dig(node["status"], "capacity", "nvidia.com/gpu")
        dig({"not": "read from the cluster"}, "not")
    assert later.as_json() == [
        {
            "object": {"kind": "Node", "namespace": None, "name": "lab-node-0", "resourceVersion": "42"},
            "fields": {"status.capacity.nvidia.com/gpu": None},
        }
    ]


def test_a_check_keeps_a_bounded_number_of_entries_and_marks_the_rest():
    with evidence.recording(evidence.Evidence()) as seen:
        for n in range(evidence.ENTRIES + 10):
            evidence.note_object("Pod", {"metadata": {"name": f"p{n}", "namespace": "x", "resourceVersion": "1"}})
    shown = seen.as_json()
    assert len(shown) == evidence.ENTRIES + 1 and shown[-1] == {"cut": "10 more entries left out"}
    assert len(json.dumps(shown)) <= evidence.CHECK_CHARS


def test_hidden_names_and_secrets_are_never_shown():
    with evidence.recording(evidence.Evidence(hidden=frozenset({"decoy-agent"}))) as seen:
        evidence.note_object("Pod", {"metadata": {"name": "decoy-agent", "namespace": "ops", "resourceVersion": "7"}})
        seen.add("run", {"stdout": quoting.head("MISSING=decoy-agent/lab-node-2\ntoken: abc123", 100)[0]})
    shown = json.dumps(seen.as_json())
    assert "decoy-agent" not in shown and "(hidden)" in shown
    assert "abc123" not in shown and "(secret)" in shown


def test_a_runs_output_is_quoted_by_its_head_without_the_graders_paths_or_secrets(tmp_path):
    root, work = tmp_path / "root", tmp_path / "work"
    flood = (
        f"reading {root}/etc/containerd/config.toml and {work}/run-3/fake-containerd/dump.toml\n"
        "client-key-data: LS0tLS1CRUdJTi\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n"
        + "x"
        * 100_000
    )
    (work / "planned-1-v3").mkdir(parents=True)
    (work / "planned-1-v3" / "config.toml").write_text("version = 3\n")
    result = ScriptResult(["bash", f"{root}/bin/c.sh"], 1, flood, flood, False, False, False, 0.5)
    given = record.given(
        root / "bin" / "c.sh", (f"{work}/planned-1-v3/config.toml", f"{root}/etc/x.toml", "ns"), {"dump": "v2"}, None,
        (root, work),
    )  # fmt: skip
    entry = record.entry(given, result, root, work)
    assert given["script"] == "bin/c.sh" and given["args"] == ["config.toml", "etc/x.toml", "ns"]
    assert given["files"]["config.toml"]["lines"] == ["1: version = 3"]
    shown = json.dumps(entry)
    assert str(tmp_path) not in shown and "LS0tLS1CRUdJTi" not in shown and "MIIEow" not in shown
    assert "etc/containerd/config.toml" in shown and "dump.toml" in shown
    assert entry["stdout_cut"] and len(entry["stdout"]) <= evidence.OUTPUT_CHARS + len(quoting.CUT)


def _report(checks: int, evidence_chars: int, detail_chars: int) -> dict:
    entry = {"file": "out/x.txt", "lines": ["1: " + "x" * evidence_chars]}
    check = {"id": "lab.1.c", "evidence": [entry] * 20, "detail": "d" * detail_chars}
    return {"steps": [{"number": 1, "checks": [dict(check) for _ in range(checks)]}]}


def test_a_report_stays_under_one_mebibyte_with_what_was_cut_marked():
    big = bounded(_report(60, 1_000, 20_000))
    assert len(json.dumps(big, indent=1).encode()) <= REPORT_LIMIT and big["cut"] is True
    assert all(check["evidence"][-1].get("cut") for check in big["steps"][0]["checks"])
    small = _report(2, 10, 10)
    assert bounded(small) == _report(2, 10, 10) and "cut" not in small


def test_a_steps_files_and_kinds_are_read_from_its_evidence():
    step = {
        "checks": [
            {"evidence": [{"file": "out/a.txt"}, {"object": {"kind": "Node", "name": "n"}}]},
            {"evidence": [{"list": {"kind": "Pod"}}, {"run": {"script": "bin/c.sh", "cluster": True}}]},
            {"evidence": [{"cut": "1 more entries left out"}]},
        ]
    }
    assert step_reads(step) == ({"out/a.txt", "bin/c.sh"}, {"Node", "Pod", ANY_KIND})


def _hidden_gpunode(folder: Path) -> Path:
    """gpunode, its near misses' names hidden (``near_misses_hidden``), under a name of its own."""
    copy = folder / "gpunode-hidden"
    shutil.copytree(GRADERS / "gpunode", copy, ignore=shutil.ignore_patterns("__pycache__"))
    text = (copy / "lab.toml").read_text().replace('name = "gpunode"', 'name = "gpunode-hidden"', 1)
    (copy / "lab.toml").write_text(text.replace("near_misses = [", "near_misses_hidden = true\nnear_misses = [", 1))
    return folder


@pytest.mark.parametrize("lab", ["gpuop", "gpurt", "gpunode"])
def test_every_check_of_a_reference_grading_has_bounded_evidence_and_nothing_hidden(lab, tmp_path, pytester, capsys):
    course = _hidden_gpunode(tmp_path / "course") if lab == "gpunode" else None
    name = "gpunode-hidden" if course else lab
    found = discover([course] if course else []).get(name)
    root, report = tmp_path / "root", tmp_path / "report.json"
    with KwokCluster.for_lab(found, name=f"tests-evidence-{lab}") as cluster:
        solve(lab, cluster, root)
        result = pytester.runpytest_subprocess(
            f"--lab={name}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}", f"--gpulab-report={report}",
            "--lab-seed=918273", "-p", "no:cacheprovider", *([f"--lab-dir={course}"] if course else []),
        )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    data = json.loads(report.read_text())
    assert report.stat().st_size < REPORT_LIMIT
    checks = [check for step in data["steps"] for check in step["checks"]]
    empty = [check["id"] for check in checks if not check["evidence"]]
    assert not empty, f"checks without evidence: {empty}"
    shown = json.dumps([check["evidence"] for check in checks])
    assert "918273" not in shown and "lab-seed" not in shown
    assert "/tmp/" not in shown and str(GRADERS) not in shown
    if course:
        names = {miss.name for miss in near_misses_in(found.near_misses)}
        assert not [n for n in names if f'"{n}"' in shown or f"{n}/" in shown], "a hidden near miss is named"
        assert "(hidden)" in shown
    for step in data["steps"]:
        files, kinds = step_reads(step)
        assert files or kinds, step["number"]
    capsys.readouterr()
    assert main(["explain", str(report), checks[-1]["id"]]) == 0
    printed = capsys.readouterr().out
    assert checks[-1]["id"] in printed and "918273" not in printed
    print(f"{lab}: report {report.stat().st_size} bytes, evidence {len(shown)} characters")


def test_explain_prints_a_checks_evidence_never_its_detail_and_names_a_missing_check(tmp_path, capsys):
    check = {
        "id": "gpuop.5.pending-reason", "name": "pending-reason", "outcome": "failed", "message": "REASON is wrong.",
        "hint": None, "detail": {"seed": 918273}, "evidence": [{"file": "out/pending.txt", "lines": ["1: REASON=x"],
        "line_count": 1}, {"run": {"script": "bin/c.sh", "args": ["ns"], "cluster": True}, "exit": 1,
        "duration": 0.2, "stdout": "MISSING=a", "stderr": ""}, {"cut": "3 more entries left out"}],
    }  # fmt: skip
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"lab": "gpuop", "steps": [{"number": 5, "checks": [check]}]}))
    assert main(["explain", str(report), "5.pending-reason"]) == 0
    printed = capsys.readouterr().out
    assert "REASON is wrong." in printed and "1: REASON=x" in printed and "run bin/c.sh ns: exit 1" in printed
    assert "stdout: MISSING=a" in printed and "3 more entries left out" in printed and "918273" not in printed
    assert main(["explain", str(report), "gpuop.9.nothing"]) == 1
    report.write_text("{not json")
    assert main(["explain", str(report), "gpuop.5.pending-reason"]) == 1
    assert "could not be read" in capsys.readouterr().err


def test_hostile_files_leave_bounded_evidence_and_never_break_the_reading(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "garbage.toml").write_bytes(bytes(range(256)) * 4000)
    (tmp_path / "etc" / "wide.toml").write_text("".join(f'k{n}{"x" * 500} = "{"v" * 1000}"\n' for n in range(500)))
    (tmp_path / "etc" / "deep.yaml").write_text("kind: Pod\nmetadata: {name: deep}\nspec: " + "[" * 90 + "]" * 90)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 9)}]\n" for n in range(8)
    )
    (tmp_path / "etc" / "laughs.yaml").write_text(laughs)
    (tmp_path / "etc" / "loop.toml").symlink_to(tmp_path / "etc" / "loop.toml")
    work = LearnerWork(tmp_path)
    with evidence.recording(evidence.Evidence()) as seen:
        wide = work.file("etc/wide.toml").toml()
        for key in wide:
            dig(wide, key)
        deep = work.file("etc/deep.yaml").objects()
        dig(deep, 0, "spec", *[0] * 80)
        for name in ("garbage.toml", "laughs.yaml", "loop.toml"):
            reader = work.file(f"etc/{name}")
            with pytest.raises(StepFailed):
                reader.objects() if name.endswith(".yaml") else reader.toml()
    shown = seen.as_json()
    assert len(json.dumps(shown)) <= evidence.CHECK_CHARS + 100
    wide_entry = next(entry for entry in shown if entry.get("file") == "etc/wide.toml")
    assert len(wide_entry["fields"]) == evidence.FIELDS and wide_entry["fields_cut"] and wide_entry["cut"]
    assert all(len(name) <= evidence.VALUE_CHARS + len(quoting.CUT) for name in wide_entry["fields"])
    assert {entry["file"] for entry in shown} >= {"etc/garbage.toml", "etc/deep.yaml", "etc/laughs.yaml"}


def test_a_lab_hides_its_near_misses_names_by_its_lab_file_and_gpulab_labs_shows_them_not(tmp_path, capsys):
    course = _hidden_gpunode(tmp_path / "course")
    lab = discover([course]).get("gpunode-hidden")
    assert lab.near_misses_hidden and "gpu-feature-discovery-debug" in hidden_names(lab)
    assert hidden_names(discover().get("gpunode")) == frozenset()
    assert main(["labs", "--lab-dir", str(course), "gpunode-hidden"]) == 0
    printed = capsys.readouterr().out
    assert "Pod (hidden)" in printed and "gpu-feature-discovery-debug" not in printed
    text = (course / "gpunode-hidden" / "lab.toml").read_text()
    (course / "gpunode-hidden" / "lab.toml").write_text(
        text.replace("near_misses_hidden = true", 'near_misses_hidden = "yes"')
    )
    with pytest.raises(LabFileError, match="near_misses_hidden should be a bool"):
        load_lab(course / "gpunode-hidden")


MINI_STEP = """
import pytest

from pytest_gpulab.grading import expect

pytestmark = pytest.mark.step(1, "Files", points=1)


@pytest.fixture(scope="module")
def answers(learner):
    return learner.file("out/answers.txt").key_values("COUNT")


def test_count(answers):
    expect(answers["COUNT"] == "2", "COUNT should be 2.")


def test_notes(learner):
    expect("gpu" in learner.file("out/notes.txt").text(), "notes should mention gpu.")


def test_count_again(answers):
    expect(int(answers["COUNT"]) > 0, "COUNT should be positive.")
"""


def test_a_module_fixtures_reads_count_for_each_check_that_uses_it_and_no_other(pytester, tmp_path):
    lab = tmp_path / "course" / "mini"
    lab.mkdir(parents=True)
    (lab / "lab.toml").write_text('name = "mini"\ntitle = "Mini"\ndefault_root = "/root/mini"\nrubric_version = "1"\n')
    (lab / "step1_files.py").write_text(MINI_STEP)
    root = tmp_path / "root"
    (root / "out").mkdir(parents=True)
    (root / "out" / "answers.txt").write_text("COUNT=2\n")
    (root / "out" / "notes.txt").write_text("the gpu node\n")
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess(
        f"--lab-dir={tmp_path / 'course'}", "--lab=mini", f"--lab-root={root}", f"--gpulab-report={report}"
    )
    assert result.ret == 0, result.stdout.str()[-2000:]
    checks = {check["name"]: check["evidence"] for check in json.loads(report.read_text())["steps"][0]["checks"]}
    assert {name: [entry["file"] for entry in found] for name, found in checks.items()} == {
        "count": ["out/answers.txt"],
        "notes": ["out/notes.txt"],
        "count-again": ["out/answers.txt"],
    }
    assert checks["count-again"][0]["lines"] == ["1: COUNT=2"]


@pytest.mark.parametrize("lab", ["gpuop", "gpurt", "gpunode"])
def test_an_untouched_start_is_graded_with_evidence_for_every_failure(lab, tmp_path, pytester):
    root, report = tmp_path / "root", tmp_path / "report.json"
    (root / "bin").mkdir(parents=True)
    with KwokCluster.for_lab(lab, name=f"tests-evidence-start-{lab}") as cluster:
        result = pytester.runpytest_subprocess(
            f"--lab={lab}", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}", f"--gpulab-report={report}",
            "-p", "no:cacheprovider",
        )  # fmt: skip
    assert result.ret == 1, result.stdout.str()[-3000:]
    data = json.loads(report.read_text())
    checks = [check for step in data["steps"] for check in step["checks"]]
    assert data["complete"] and report.stat().st_size < REPORT_LIMIT
    assert {check["outcome"] for check in checks} <= {"failed", "blocked", "passed"}
    assert [check["id"] for check in checks if check["outcome"] == "failed" and not check["evidence"]] == []
