"""The authoring guide is real: the README shows the example lab's files as they are, and that lab,
copied outside the checkout as a course author would keep it, comes up with its topology and is graded."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from grading import json_report

from pytest_gpulab import grading as authoring
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs import discover

CHECKOUT = Path(__file__).resolve().parent.parent
EXAMPLE = CHECKOUT / "tests" / "examples" / "gpuquota"
README_FILE = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)
STEP_MODULES = sorted([*(CHECKOUT / "graders").glob("*/step*.py"), *EXAMPLE.glob("step*.py")])


GUIDE = CHECKOUT / "docs" / "authors.md"
DOCS = sorted([CHECKOUT / "README.md", *(CHECKOUT / "docs").glob("*.md")])


def readme_files() -> dict[str, str]:
    """Every block of the docs that names a file (``<!-- file: PATH -->``), by that file."""
    return {path: text for doc in DOCS for path, text in README_FILE.findall(doc.read_text())}


def test_the_docs_show_the_example_lab_as_it_is():
    shown = readme_files()
    assert {"tests/examples/gpuquota/lab.toml", "tests/examples/gpuquota/step2_free_gpus.py"} <= set(shown)
    for relative, text in shown.items():
        assert (CHECKOUT / relative).read_text() == text, f"the docs show {relative} differently from the file"


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """Every import of a module: (module, names imported from it), a relative one as ``.module``."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(("." * node.level + (node.module or ""), [alias.name for alias in node.names]))
    return found


def test_every_lab_has_its_step_modules_checked():
    assert {path.parent.name for path in STEP_MODULES} == {"gpuop", "gpurt", "gpunode", "gpuquota"}
    assert len(STEP_MODULES) >= 26


KITS = {name: getattr(authoring, name) for name in ("answers", "containerd", "k8s", "scripts")}
PUBLIC = [(authoring, name) for name in authoring.__all__ if name not in KITS] + [
    (kit, name) for kit in KITS.values() for name in kit.__all__
]


def lab_helpers(path: Path) -> set[str]:
    """The lab's own helper modules, beside its steps: a name that starts with ``_`` (``_kit``)."""
    return {helper.stem for helper in path.parent.glob("_*.py") if helper.stem != "__init__"}


@pytest.mark.parametrize("path", STEP_MODULES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_a_step_module_imports_from_the_grading_module_only(path):
    for module, names in imports_of(path):
        if module == "pytest_gpulab.grading":
            assert set(names) <= set(authoring.__all__), f"{path.name} imports {names} beyond grading.__all__"
        elif module.lstrip(".") in lab_helpers(path) or (module == "." and set(names) <= lab_helpers(path)):
            continue  # the lab's own helper module
        else:
            assert module.split(".")[0] in {"pytest", *sys.stdlib_module_names}, (
                f"{path.name} imports from {module}: a step module imports from pytest_gpulab.grading (and pytest) only"
            )


@pytest.mark.parametrize("path", STEP_MODULES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_every_name_a_step_reads_from_a_kit_is_the_kit_s(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in KITS:
            kit = KITS[node.value.id]
            assert node.attr in kit.__all__, f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}"


def test_the_core_is_small_and_every_kit_names_its_whole_index():
    assert len(set(authoring.__all__) - set(KITS)) <= 14, authoring.__all__
    for name, kit in KITS.items():
        index = kit.__doc__ or ""
        assert not [n for n in kit.__all__ if n not in index], f"grading.{name}'s docstring leaves names out"
        assert not set(kit.__all__) & set(authoring.__all__), f"grading.{name} repeats a core name"


def defined_where(module, name: str) -> str:
    """The module ``module`` takes ``name`` from."""
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.ImportFrom) and name in {alias.name for alias in node.names}:
            return importlib.util.resolve_name("." * node.level + (node.module or ""), module.__package__)
    raise AssertionError(f"{module.__name__} does not import {name}")


def docstring_of(module, name: str) -> str | None:
    """A function's or class's own docstring; a constant's is the string right after its assignment."""
    value = getattr(module, name)
    if not isinstance(value, (str, int, float, tuple, frozenset, dict)):
        return value.__doc__
    body = ast.parse(Path(importlib.import_module(defined_where(module, name)).__file__ or "").read_text()).body
    for statement, following in itertools.pairwise(body):
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        named = any(isinstance(target, ast.Name) and target.id == name for target in targets)
        if named and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            return str(following.value.value)
    return None


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=lambda value: getattr(value, "__name__", value))
def test_every_name_of_the_grading_module_and_its_kits_has_a_docstring_with_an_example(module, name):
    docstring = docstring_of(module, name) or ""
    assert "Example::" in docstring or ">>>" in docstring, f"{module.__name__}.{name} has no docstring with an example"


def test_the_grading_module_leaves_the_kubernetes_client_for_later():
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            # a step module that names DoctoredView is collected before any check reads the cluster
            "import sys, pytest_gpulab.grading as g; g.scripts.DoctoredView; "
            "print(any(m.startswith('kubernetes') for m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.stdout.strip() == "False", loaded.stderr
    assert authoring.scripts.DoctoredView.__name__ == "DoctoredView"


def test_the_authoring_guide_names_the_core_and_every_kit():
    readme = GUIDE.read_text()
    section = readme[readme.index("## Authors: add a step") :].split("\n## ", 1)[0]
    prose = re.sub(r"```.*?```", "", section, flags=re.S)
    named = {word for code in re.findall(r"`([^`]+)`", prose) for word in re.findall(r"\w+", code)}
    assert set(authoring.__all__) <= named, f"docs/authors.md leaves out {set(authoring.__all__) - named}"


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """The example lab as a course author keeps it: a folder of labs outside this checkout."""
    shutil.copytree(EXAMPLE, tmp_path / "course" / "gpuquota", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "course"


def grade(pytester: pytest.Pytester, course: Path, root: Path, cluster: KwokCluster) -> dict:
    return json_report(pytester, "gpuquota", root, cluster, f"--lab-dir={course}")


def test_a_lab_made_only_of_files_is_brought_up_with_its_topology_and_graded(pytester, course, tmp_path):
    lab = discover([course]).get("gpuquota")
    assert lab.folder == (course / "gpuquota").resolve()
    assert lab.rubric_version == "1"
    root = tmp_path / "root"
    root.mkdir()
    with KwokCluster.for_lab(lab, name="tests-example") as cluster:
        gpu_node = cluster.get_json("node", "gpu-node")
        assert gpu_node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
        assert gpu_node["metadata"]["labels"]["gpu.example/model"] == "a100"
        assert gpu_node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        assert "taints" not in cluster.get_json("node", "cpu-node-0")["spec"]
        assert cluster.get_json("configmap", "quota", "-n", "team-a")["data"] == {"gpus": "2"}

        untouched = grade(pytester, course, root, cluster)
        assert untouched["gpulab"]["earned"] == 0
        assert untouched["gpulab"]["possible"] == 15
        assert all(test["metadata"].get("internal_error") is False for test in untouched["tests"])

        solved = subprocess.run(
            ["bash", str(lab.reference), str(root)],
            env=cluster.environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert solved.returncode == 0, solved.stderr
        graded = grade(pytester, course, root, cluster)
        assert graded["gpulab"]["earned"] == 15, [t["metadata"] for t in graded["tests"] if t["outcome"] != "passed"]
        checks = {test["metadata"]["check"] for test in graded["tests"]}
        assert checks == {
            "gpuquota.1.trainer-written-and-applied",
            "gpuquota.1.trainer-runs-on-the-gpu-node",
            "gpuquota.2.free-gpus",
        }


def test_gpulab_demo_runs_a_lab_from_a_lab_dir(course):
    demo = subprocess.run(
        [sys.executable, "-m", "pytest_gpulab.cli", "demo", "--lab-dir", str(course), "gpuquota"],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "gpuquota/step-1" in demo.stdout
    assert "total: 15/15 points" in demo.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "pytest_gpulab.cli", "labs", "--lab-dir", str(course)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert {line.split("\t")[0] for line in listed.stdout.splitlines()} == {*discover().names, "gpuquota"}


def test_a_broken_lab_file_is_named_without_hiding_the_other_labs(tmp_path, pytester):
    broken = tmp_path / "course" / "broken"
    broken.mkdir(parents=True)
    (broken / "lab.toml").write_text(
        'name = "broken"\ntitle = "x"\ndefault_root = "/root/x"\nrubric_version = "1"\n[[environment.nodes]]\nname = "n"\ntaint = []\n'
    )
    catalog = discover([tmp_path / "course"])
    assert "gpuop" in catalog.names
    assert "broken" not in catalog.names
    assert any("unknown key environment.nodes[0].taint" in problem for problem in catalog.problems), catalog.problems
    result = pytester.runpytest_subprocess(f"--lab-dir={tmp_path / 'course'}", "--lab", "broken", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown lab 'broken'*", "*could not be read*", "*unknown key environment.nodes[[]0[]].taint*"]
    )


def test_each_lab_s_steps_import_their_own_helper_module(tmp_path, monkeypatch):
    from pytest_gpulab.collect import own_helpers

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    for lab in ("first", "second"):
        (tmp_path / lab).mkdir()
        (tmp_path / lab / "_kit.py").write_text(f"LAB = {lab!r}\n")
    for lab in ("first", "second", "first"):
        own_helpers(tmp_path / lab)
        assert lab == importlib.import_module("_kit").LAB


def test_the_reference_is_made_from_the_docstrings_as_they_are():
    made = subprocess.run(
        [sys.executable, str(CHECKOUT / "scripts" / "reference.py")],
        capture_output=True, text=True, timeout=120, cwd=CHECKOUT,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout == (CHECKOUT / "docs" / "reference.md").read_text(), (
        "docs/reference.md is stale: .venv/bin/python scripts/reference.py > docs/reference.md"
    )


def test_a_contract_is_listed_for_a_step_that_imports_its_lab_s_own_helper(tmp_path, monkeypatch):
    from pytest_gpulab.contracts import checkers_of

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    (tmp_path / "_kit.py").write_text('SCRIPT = "bin/check.sh"\n')
    (tmp_path / "step3_check.py").write_text(
        "from _kit import SCRIPT\n\nfrom pytest_gpulab.grading import Checker\n\n"
        'CHECKER = Checker(SCRIPT, finding="FULL", reads_cluster=True)\n'
    )
    assert [(number, checker.script) for number, checker in checkers_of(tmp_path)] == [(3, "bin/check.sh")]
