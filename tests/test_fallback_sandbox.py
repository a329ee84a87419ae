"""Where bubblewrap cannot make namespaces (root in a container without ``CAP_SYS_ADMIN``, as Gradescope
runs), a root grader still runs each script as a uid of its own: ``Sandbox("none", RUN_UIDS)``, forced here.

The lab root and the grader's work folder sit in 0700 folders, as a bundle's grading and pytest's own
temporary folders do. A right answer gets full marks there (the script runs from a copy the uid may read,
with everything it is given copied beside it), and the script cannot write the lab root, the grader's work
folder or the copy it runs from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from grading import json_report, solve
from hostile_scripts import fingerprint

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox.confine import RUN_UIDS, Sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a root grader runs scripts as uids of their own")
FALLBACK = Sandbox("none", RUN_UIDS, missing=("no sandbox: forced by the test",))
# Loaded by the graded run (-p): this machine's probe would find bubblewrap working.
PLUGIN = """
from pytest_gpulab.sandbox import confine

FALLBACK = confine.Sandbox("none", confine.RUN_UIDS, missing=("no sandbox: forced by the test",))
confine.probe = lambda: FALLBACK
"""


def private(tmp_path: Path, name: str) -> Path:
    """A folder inside a 0700 one: out of reach of every uid but root."""
    (tmp_path / "private").mkdir(mode=0o700, exist_ok=True)
    (tmp_path / "private").chmod(0o700)
    return tmp_path / "private" / name


@pytest.mark.parametrize("lab", ["gpuop", "gpunode", "gpurt"])
def test_a_right_answer_gets_full_marks_without_a_sandbox(pytester, tmp_path, lab):
    """gpuop's step 4 runs a script on dumps; gpunode's and gpurt's scripts read the cluster too."""
    root = private(tmp_path, f"{lab}-root")
    with KwokCluster.for_lab(lab, name=f"tests-fallback-{lab}") as cluster:
        solve(lab, cluster, root)
        pytester.makepyfile(gpulab_forced_fallback=PLUGIN)
        report = json_report(pytester, lab, root, cluster, "-p", "gpulab_forced_fallback")
    failed = {test["nodeid"]: test.get("call", {}).get("longrepr", "")[-600:] for test in report["tests"]
              if test["outcome"] != "passed"}  # fmt: skip
    assert report["tests"] and not failed, failed


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    root = private(tmp_path, "lab")
    (root / "bin").mkdir(parents=True)
    (root / "out").mkdir()
    (root / "out" / "merge.txt").write_text("MAIN_RUNTIMES=runc\n")
    return root


@pytest.fixture
def runner(tmp_path: Path, lab: Path) -> Iterator[ScriptRunner]:
    scripts = ScriptRunner(private(tmp_path, "work"), 20.0, lambda: None, lab_root=lab, sandbox=FALLBACK)
    yield scripts
    scripts.close()


ATTACK = """#!/bin/sh
id -u
for target in "$LAB/pwned" "$LAB/out/merge.txt" "$WORK/pwned" "$0" "$(dirname "$0")/pwned"; do
  (echo pwned >> "$target") 2>/dev/null && echo "wrote $target" || echo refused
done
cat "$(dirname "$0")/../out/merge.txt"
cat "$1"
containerd config dump >/dev/null && echo dumped
echo scratch > scratch.txt && echo scratch-ok
"""


def test_a_script_without_a_sandbox_reads_what_it_is_given_and_writes_none_of_the_grader_s_files(
    runner, lab, tmp_path, monkeypatch
):
    script = lab / "bin" / "attack.sh"
    script.write_text(ATTACK)
    script.chmod(0o755)
    given = private(tmp_path, "dump.toml")
    given.write_text("GIVEN-DUMP\n")
    monkeypatch.setenv("LAB", str(lab))
    monkeypatch.setenv("WORK", str(runner.work))
    before = fingerprint(lab, runner.work)
    run = runner.run(script, str(given), dump="v2-runc-nvidia")
    lines = run.result.stdout.splitlines()
    assert run.result.exit_code == 0 and int(lines[0]) in RUN_UIDS, run.result
    assert lines[1:6] == ["refused"] * 5, run.result
    assert lines[6:] == ["MAIN_RUNTIMES=runc", "GIVEN-DUMP", "dumped", "scratch-ok"], run.result
    assert run.asked_for_config_dump()
    assert run.user == int(lines[0])
    assert {path: digest for path, digest in fingerprint(lab, runner.work).items() if path in before} == before
    assert not (runner.work / "pwned").exists()
    assert not (lab / "pwned").exists()
    staged_script, staged_dump = map(Path, run.result.command[:2])
    assert staged_script.name == "attack.sh"
    assert not staged_dump.exists()
    runner.close()
    assert not staged_script.exists()


def test_a_script_without_a_sandbox_reads_the_cluster_through_its_view_and_may_not_write(tmp_path, lab, gpuop_cluster):
    script = lab / "bin" / "nodes.sh"
    script.write_text(
        "#!/bin/sh\ncase $KUBECONFIG in /tmp/gpulab-run-*) echo view;; *) echo other;; esac\n"
        "kubectl get nodes -o name | sort\nkubectl label node lab-node-0 pwned=yes >/dev/null 2>&1 || echo refused\n"
    )
    script.chmod(0o755)
    runner = ScriptRunner(private(tmp_path, "work"), 30.0, lambda: str(gpuop_cluster.kubeconfig), lab_root=lab,
                          sandbox=FALLBACK)  # fmt: skip
    try:
        run = runner.run(script, cluster=True)
    finally:
        runner.close()
    nodes = gpuop_cluster.get_json("nodes")["items"]
    assert run.result.stdout.splitlines() == ["view", *sorted(f"node/{n['metadata']['name']}" for n in nodes),
                                              "refused"], run.result  # fmt: skip
    assert run.result.writes and all(method == "PATCH" for method, _ in run.result.writes), run.result.writes
    assert all("pwned" not in node["metadata"].get("labels", {}) for node in nodes)
