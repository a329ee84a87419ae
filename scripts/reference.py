"""The authors' reference, docs/reference.md, made from the docstrings of the core and each kit.

    .venv/bin/python scripts/reference.py > docs/reference.md

tests/test_authoring.py fails when the file differs from what this prints, so it cannot go stale.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import itertools
from pathlib import Path
from types import ModuleType

from pytest_gpulab import grading

KITS = ("k8s", "containerd", "answers", "scripts")


def constant_doc(module: ModuleType, name: str) -> str:
    """The string right after a constant's assignment, in the module that defines it."""
    for node in ast.walk(ast.parse(Path(module.__file__ or "").read_text())):
        if isinstance(node, ast.ImportFrom) and name in {alias.name for alias in node.names}:
            source = importlib.import_module(
                importlib.util.resolve_name("." * node.level + (node.module or ""), module.__package__)
            )
            body = ast.parse(Path(source.__file__ or "").read_text()).body
            for statement, following in itertools.pairwise(body):
                targets = statement.targets if isinstance(statement, ast.Assign) else []
                if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(following, ast.Expr):
                    return str(getattr(following.value, "value", ""))
    return ""


def entry(module: ModuleType, prefix: str, name: str) -> str:
    value = getattr(module, name)
    if inspect.isfunction(value) or inspect.isclass(value):
        signature = str(inspect.signature(value)).replace("'", "") if inspect.isfunction(value) else ""
        title, doc = f"{prefix}{name}{signature}", inspect.getdoc(value) or ""
    else:
        title, doc = f"{prefix}{name} = {value!r}", inspect.cleandoc(constant_doc(module, name))
    return f"### `{title}`\n\n{doc}\n"


def reference() -> str:
    core = [name for name in grading.__all__ if name not in KITS]
    parts = [
        "# Reference: the core and the kits\n",
        "Made from the docstrings by `scripts/reference.py`; do not edit by hand. The tutorial is "
        "[authors.md](authors.md).\n",
        "## The core: `from pytest_gpulab.grading import ...`\n",
        *(entry(grading, "", name) for name in core),
    ]
    for kit_name in KITS:
        kit = getattr(grading, kit_name)
        parts += [
            f"## The `{kit_name}` kit: `from pytest_gpulab.grading import {kit_name}`\n",
            f"{inspect.getdoc(kit)}\n",
        ]
        parts += [entry(kit, f"{kit_name}.", name) for name in kit.__all__]
    return "\n".join(parts)


if __name__ == "__main__":
    print(reference(), end="")
