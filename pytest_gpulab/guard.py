"""Grading never takes code or settings from the learner's directory, and writes nothing there.

pytest chooses its rootdir and settings file before any plugin loads, and
imports the ``conftest.py`` files of the directory it starts in. A run
started in the learner's directory could therefore take the learner's
``pytest.ini`` or run the learner's ``conftest.py`` inside the grader. This
module only looks (it changes no pytest state but for switching the cache off):

- a settings file inside the learner's directory is refused;
- a ``conftest.py`` that pytest would import from inside it is refused;
- when the rootdir is inside it, the cache plugins are switched off, as
  ``-p no:cacheprovider`` would, so no ``.pytest_cache`` is written there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest


def within(path: Path | None, directory: Path) -> bool:
    if path is None:
        return False
    path = path.resolve()
    return path == directory or directory in path.parents


def _anchors(early_config: pytest.Config) -> list[Path]:
    """The directories pytest takes its initial conftests from: the paths given, else where it started."""
    given = [Path(str(arg).split("::")[0]) for arg in early_config.known_args_namespace.file_or_dir or []]
    start = early_config.invocation_params.dir
    anchors = [start / path for path in given] or [start]
    return [anchor if anchor.is_dir() else anchor.parent for anchor in anchors]


def initial_conftests(early_config: pytest.Config) -> Iterator[Path]:
    """The ``conftest.py`` files pytest imports before collecting: in each anchor, its ``test*``
    sub-directories and their parents, stopping at ``--confcutdir`` (by default the rootdir)."""
    confcutdir = early_config.known_args_namespace.confcutdir
    cut = Path(confcutdir).resolve() if confcutdir else None
    for anchor in _anchors(early_config):
        for directory in [anchor, *sorted(p for p in anchor.glob("test*") if p.is_dir())]:
            for parent in (directory.resolve(), *directory.resolve().parents):
                if (cut is None or parent not in cut.parents) and (parent / "conftest.py").is_file():
                    yield parent / "conftest.py"


def _refuse_learner_conftests(conftests: Iterable[Path], learner_root: Path) -> None:
    inside = sorted({path for path in conftests if within(path, learner_root)})
    if inside:
        raise pytest.UsageError(
            f"pytest would import {inside[0]}, inside the learner's directory {learner_root}; grading never runs the "
            "learner's Python inside the grader. Start the grader from another directory (e.g. `cd ~`), or pass "
            "--noconftest."
        )


def stay_out_of(learner_root: Path, early_config: pytest.Config) -> None:
    """Refuse the learner's settings and conftest files; write no cache into their directory."""
    if within(early_config.inipath, learner_root):
        raise pytest.UsageError(
            f"pytest would take its settings from {early_config.inipath}, inside the learner's directory "
            f"{learner_root}; grading never does. Run the grader from another directory, or pass --rootdir "
            "and -c naming a directory and settings file of your own."
        )
    if not early_config.known_args_namespace.noconftest:
        _refuse_learner_conftests(initial_conftests(early_config), learner_root)
    if within(early_config.rootpath, learner_root):
        for name in ("cacheprovider", "stepwise"):
            if early_config.pluginmanager.has_plugin(name):
                early_config.pluginmanager.unregister(name=name)
