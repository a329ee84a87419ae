"""The checker contracts a lab's steps declare (``CHECKER = Checker(...)``), read from its step modules, for
``gpulab labs LAB``: what a learner's script is held to, before any grading."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .collect import own_helpers, step_number_of
from .grading.scripts.checker import Checker


def checkers_of(folder: Path) -> list[tuple[int, Checker]]:
    """Each step's declared checkers, in step order; a step module that cannot be imported declares none here
    (grading it says why)."""
    found = []
    own_helpers(folder)  # a step imports the lab's own _kit.py by name
    for path in sorted(folder.glob("*.py")):
        if (number := step_number_of(path)) is None:
            continue
        spec = importlib.util.spec_from_file_location(f"gpulab_contracts_{folder.name}_{path.stem}", path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception:
            continue
        found += [(number, value) for value in vars(module).values() if isinstance(value, Checker)]
    return sorted(found, key=lambda pair: pair[0])
