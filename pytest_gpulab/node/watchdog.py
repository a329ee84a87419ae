"""A node's watchdog: takes the node down when the process that brought it up ends, however it ends.

``python -m pytest_gpulab.node.watchdog FOLDER NAME NODE_BIN KUBECTL OWNER_PID OWNER_START``, started by
:meth:`RealNode.up` for a node that must not outlive its caller (a test's, a library's; ``gpulab node up``'s
node outlives the command by design). It waits on the owner's pidfd, then runs :meth:`RealNode.down`; a
normal ``down`` kills the watchdog first.
"""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path

from ..cluster.reaper import start_time
from .lifecycle import RealNode


def wait_for_end(pid: int, start: str) -> None:
    """Return once process ``pid`` (the one that started at ``start``) has ended."""
    if start_time(pid) != start:
        return
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([handle], [], [])  # readable once the process has ended
    finally:
        os.close(handle)


def main(argv: list[str]) -> int:
    folder, name, node_bin, kubectl, owner, owner_start = argv
    wait_for_end(int(owner), owner_start)
    left = RealNode.of_folder(name, Path(folder), Path(node_bin), Path(kubectl)).down()
    for thing in left:
        print(f"gpulab node watchdog: left on the machine: {thing}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
