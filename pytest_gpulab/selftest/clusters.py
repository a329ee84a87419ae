"""A self-test row's lab cluster, started once more when the machine could not start it the first time.

A slow or crowded machine can fail a cluster's start (an API server not ready within its bound): that is the
machine's fault, not the lab's. So a start that fails is tried once more on a new cluster; failing twice, the
row is a :class:`MachineError`, one line saying what failed and where its whole log was kept, and the
summary counts it apart from the rows that say the lab is wrong. Usable without pytest.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from ..cluster.kwok import KwokCluster, KwokClusterError
from ..cluster.toolchain import cache_root
from .state import RowError

KEPT_LOGS = 20  # the newest logs of failed starts kept in the cache; older ones go


class MachineError(RowError):
    """The machine could not run the row: its lab cluster did not start, twice."""


def started(make: Callable[[], KwokCluster], what: str) -> KwokCluster:
    """A started cluster from ``make``, tried twice; else :class:`MachineError` in one line."""
    failures: list[str] = []
    for _ in range(2):
        cluster = make()
        try:
            return cluster.start()
        except KwokClusterError as error:
            failures.append(str(error))
    log = kept_log(what, failures)
    first = next((line.strip() for line in failures[-1].splitlines() if line.strip()), "no reason given")
    raise MachineError(f"the lab cluster did not start, twice ({first[:200]}); its log: {log}")


def kept_log(what: str, failures: list[str]) -> Path:
    """The failed starts' whole text, in the cache's ``selftest-logs`` (the newest KEPT_LOGS are kept)."""
    folder = cache_root() / "selftest-logs"
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", what).strip("-") or "row"
    log = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}.log"
    log.write_text("\n\n".join(f"attempt {n}:\n{text}" for n, text in enumerate(failures, start=1)) + "\n")
    for old in sorted(folder.glob("*.log"), key=lambda path: path.stat().st_mtime)[:-KEPT_LOGS]:
        old.unlink(missing_ok=True)
    return log
