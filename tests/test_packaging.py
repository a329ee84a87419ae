"""A wheel built from the checkout, in a fresh virtualenv: it grades gpuop, and finds the labs another
installed package declares through the ``pytest_gpulab.labs`` entry point, and proves them with
``gpulab selftest``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_gpulab.cluster import toolchain
from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.labs import discover

CHECKOUT = Path(__file__).resolve().parent.parent
WHEELHOUSE = toolchain.cache_root() / "wheelhouse"  # made by scripts/setup
COURSE_PYPROJECT = """
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "mycourse"
version = "1.0"

[project.entry-points."pytest_gpulab.labs"]
mycourse = "mycourse.labs"

[tool.setuptools]
packages = ["mycourse", "mycourse.labs"]

[tool.setuptools.package-data]
"mycourse.labs" = ["*/**/*"]
"""


def run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def build_wheel(source: Path, out: Path, name: str) -> Path:
    """The source's wheel (``name``'s, since ``out`` may hold others), built offline with this environment's
    setuptools."""
    run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", out, source
    )
    return next(out.glob(f"{name}-*.whl"))


def tracked_copy(target: Path) -> Path:
    """The checkout's tracked files only, so nothing built lands in the checkout."""
    files = run("git", "ls-files", cwd=CHECKOUT).stdout.splitlines()
    for relative in files:
        if (CHECKOUT / relative).is_file():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(CHECKOUT / relative, target / relative)
    return target


def course_package(target: Path) -> Path:
    """An installable package of a course author's, shipping the example lab."""
    (target / "mycourse" / "labs").mkdir(parents=True)
    (target / "pyproject.toml").write_text(COURSE_PYPROJECT)
    (target / "mycourse" / "__init__.py").write_text("")
    (target / "mycourse" / "labs" / "__init__.py").write_text("")
    shutil.copytree(
        CHECKOUT / "tests/examples/gpuquota",
        target / "mycourse/labs/gpuquota",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return target


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not WHEELHOUSE.is_dir():
        pytest.fail(f"no wheelhouse at {WHEELHOUSE}: run scripts/setup, which makes it")
    work = tmp_path_factory.mktemp("packaging")
    wheels = work / "dist"
    ours = build_wheel(tracked_copy(work / "checkout"), wheels, "pytest_gpulab")
    theirs = build_wheel(course_package(work / "course"), wheels, "mycourse")
    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin/python", "-m", "pip", "install", "--quiet", "--no-index", "--find-links", WHEELHOUSE, ours, theirs)
    return venv


def test_the_wheel_ships_every_lab_file_and_no_bytecode(fresh_venv):
    wheel = next((fresh_venv.parent / "dist").glob("pytest_gpulab-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    lab = discover().get("gpuop").folder
    expected = {
        f"pytest_gpulab/graders/gpuop/{path.relative_to(lab)}"
        for path in lab.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert expected <= set(names), expected - set(names)
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert "pytest_gpulab/py.typed" in names
    package = CHECKOUT / "pytest_gpulab"
    modules = {f"pytest_gpulab/{path.relative_to(package).as_posix()}" for path in package.rglob("*.py")}
    pins = {f"pytest_gpulab/{path.relative_to(package).as_posix()}" for path in package.glob("cluster/gomod/*/*")}
    assert modules | pins <= set(names), sorted((modules | pins) - set(names))
    assert {"pytest_gpulab/cluster/gomod/kubernetes/go.mod", "pytest_gpulab/sandbox/forward.py"} <= set(names)


def test_a_fresh_virtualenv_grades_gpuop_and_finds_an_installed_course(fresh_venv, tmp_path):
    listed = run(fresh_venv / "bin/gpulab", "labs", cwd=tmp_path).stdout
    assert {line.split("\t")[0] for line in listed.splitlines()} == {*discover().names, "gpuquota"}
    assert "/venv/lib/" in listed  # both labs come from the installed packages, not from the checkout
    collected = run(
        fresh_venv / "bin/pytest", "--lab=gpuquota", "--co", "-q", "-p", "no:cacheprovider", cwd=tmp_path
    ).stdout
    assert "gpuquota/step-1::trainer-written-and-applied" in collected

    root = tmp_path / "root"
    report = tmp_path / "report.json"
    with KwokCluster.for_lab("gpuop", name="tests-wheel") as cluster:
        lab = discover().get("gpuop")
        solved = subprocess.run(
            ["bash", str(lab.reference), str(root)],
            env=cluster.environment(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert solved.returncode == 0, solved.stderr[-3000:]
        graded = subprocess.run(
            [str(fresh_venv / "bin/pytest"), "--lab=gpuop", f"--lab-root={root}", f"--kubeconfig={cluster.kubeconfig}",
             "--json-report", f"--json-report-file={report}", "-p", "no:cacheprovider"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert graded.returncode == 0, graded.stdout[-4000:]
    summary = json.loads(report.read_text())["gpulab"]
    assert (summary["earned"], summary["possible"]) == (100, 100)
    assert "/venv/lib/" in graded.stdout.split("from ", 1)[1].split()[0]  # the installed lab, not the checkout's


def test_an_installed_course_proves_its_lab_with_gpulab_selftest(fresh_venv, tmp_path):
    """A course package's CI: `gpulab selftest` of the lab it installed (its variants.toml shipped with it)."""
    done = subprocess.run(
        [str(fresh_venv / "bin/gpulab"), "selftest", "gpuquota", "--jobs", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert "trap trainer-without-toleration (fails 1)  F P  ok" in done.stdout
    assert "gpuquota: 6 of 6 rows as declared" in done.stdout
