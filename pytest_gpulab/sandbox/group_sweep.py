"""Control groups a killed grader left behind, found and removed by the next run's (:mod:`.cgroups`).

A run's groups are named ``run-GRADERPID-TOKEN``, below its grading's ``gpulab-scripts-GRADERPID`` or the scripts'
parent ``gpulab-scripts``: an empty one older than STALE_AFTER whose grader is gone was left by a grader killed
before it could remove it. Usable without pytest.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

PARENT = "gpulab-scripts"
STALE_AFTER = 60.0  # seconds: an empty group this old, whose grader is gone, was left by a grader killed


def owner(group: Path) -> int | None:
    """The grader process a group was made for: a grading's parent names it last, a run's second to last."""
    fields = group.name.split("-")
    owner = fields[-2] if group.name.startswith("run-") or "-run-" in group.name else fields[-1]
    return int(owner) if group.name.startswith(("run-", PARENT)) and owner.isdigit() else None


def sweep(roots: list[Path]) -> None:
    """Remove the groups a grader left when it was killed before it could: empty, older than STALE_AFTER, and
    named for a process that is gone (a group in use is not empty, and one being made is young). Runs go first,
    then the gradings' groups and the scripts' parent they leave empty (their ages read before the runs go)."""
    for root in roots:
        try:  # best effort: other gradings remove their groups while these are listed (a glob then raises ENOENT)
            parents = [group for group in root.glob(f"{PARENT}-*") if _stale(group)]
            parents += [root / PARENT] if _age(root / PARENT) > STALE_AFTER else []
            runs = [*root.glob(f"{PARENT}-*/run-*"), *(root / PARENT).glob("run-*")]
        except OSError:
            continue
        for group in [*filter(_stale, runs), *parents]:
            with contextlib.suppress(OSError):
                group.rmdir()


def _stale(group: Path) -> bool:
    grader = owner(group)
    return grader is not None and not _alive(grader) and _age(group) > STALE_AFTER


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0
