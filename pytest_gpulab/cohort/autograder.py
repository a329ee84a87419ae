"""Gradescope's autograder: grade the uploaded bundle, write ``results/results.json``.

Gradescope unpacks the autograder into ``/autograder/source``, runs ``setup.sh`` once
when it builds the image, and runs ``run_autograder`` for every submission with the
upload in ``/autograder/submission``; it reads ``/autograder/results/results.json``.
Both scripts are in ``gradescope/``; ``run_autograder`` calls :func:`run` (``gpulab
gradescope``). The root is ``$GPULAB_AUTOGRADER_ROOT`` when set, which is how the tests
run it in a temporary folder. Every other report of the grading is kept in
``results/gpulab/``. Usable without pytest.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..reports.report_file import write_atomically
from .batch import bundles_in
from .regrade import GRADED, grade_bundle


def autograder_root() -> Path:
    return Path(os.environ.get("GPULAB_AUTOGRADER_ROOT") or "/autograder")


def _failure(output: str) -> dict[str, Any]:
    return {"score": 0, "output": output, "tests": [], "visibility": "visible", "stdout_visibility": "hidden"}


def run(root: Path | None = None) -> int:
    """Grade ``ROOT/submission``'s one bundle; ``ROOT/results/results.json`` is always written."""
    root = root or autograder_root()
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    bundles = bundles_in(root / "submission")
    if len(bundles) != 1:
        found = ", ".join(path.name for path in bundles) or "none"
        write_atomically(results / "results.json", _failure(
            f"Upload exactly one bundle, the file `gpulab bundle LAB -o NAME.gpulab.tar.gz` wrote (found: {found})."
        ))  # fmt: skip
        return 0
    outcome = grade_bundle(bundles[0], results / "gpulab")
    graded = results / "gpulab" / "results.json"
    if outcome.status == GRADED and graded.is_file():
        shutil.copyfile(graded, results / "results.json")
    elif outcome.status == GRADED:
        write_atomically(results / "results.json", _failure("The grading wrote no results; ask your instructor."))
    else:
        said = (
            "could not be graded" if outcome.status == "refused" else "could not be graded this time (not your doing)"
        )
        write_atomically(results / "results.json", _failure(f"Your bundle {said}: {outcome.reason}"))
    print(json.dumps(outcome.as_dict()))
    return 0
