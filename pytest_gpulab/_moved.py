"""The import paths the README documented before the package was split into folders, kept for one
release (0.2 removes them): ``pytest_gpulab.kwok`` still gives ``KwokCluster``, with a
DeprecationWarning naming the new path (``pytest_gpulab.cluster.kwok``).

Each old path is a thin alias: a module whose attributes are read from the new one when asked,
so a test that patches the new module is seen through the old name too. Imported by the
package's ``__init__``; costs nothing until an old path is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

MOVED = {
    "answers": "grading.answers",
    "bwrap": "sandbox.bwrap",
    "clusterview": "sandbox.clusterview",
    "containerd": "sandbox.containerd",
    "feedback": "grading.feedback",
    "kube": "grading.kube",
    "kwok": "cluster.kwok",
    "live": "grading.live",
    "manifests": "grading.manifests",
    "nodes": "grading.nodes",
    "parsing": "grading.parsing",
    "runner": "sandbox.runner",
    "scripts": "grading.scripts",
    "verdicts": "grading.verdicts",
}
PACKAGE = __name__.rpartition(".")[0]


class _Alias(types.ModuleType):
    """An old path: every attribute is the new module's."""

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name, f"Moved to {target}; this alias goes in 0.2.")
        self._target = target

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._target), attribute)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self._target))


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.target}: import it from there (the old path goes in 0.2)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _Alias(spec.name, self.target)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the alias reads the new module when asked."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(f"{PACKAGE}.{MOVED[name]}"))


def install() -> None:
    """Serve the old paths (once, however often the package is imported)."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
