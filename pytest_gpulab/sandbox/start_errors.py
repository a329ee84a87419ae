"""Why a learner script could not be started, in words a learner can act on: the file at fault named, a ``#!`` line
that names no interpreter there is (or ends in a Windows CR). Usable without pytest."""

from __future__ import annotations

import errno
from pathlib import Path


def shebang(script: Path) -> str | None:
    """The interpreter its ``#!`` line names; None without one."""
    try:
        with open(script, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].rstrip(b"\n").decode("utf-8", errors="replace").strip(" \t")


def start_reason(exc: BaseException, script: Path) -> str:
    """Why starting failed, naming the file at fault when it is not the script."""
    if not isinstance(exc, OSError):
        return str(exc) or type(exc).__name__
    reason = exc.strerror or str(exc)
    if exc.filename is not None and str(exc.filename) != str(script):
        reason += f" ({exc.filename})"
    return reason


def exec_failure(exc: BaseException, script: Path, cwd: Path) -> str:
    """Why the script itself could not be executed, naming a #! interpreter that does not exist."""
    interpreter = shebang(script)
    missing = isinstance(exc, OSError) and exc.errno == errno.ENOENT and str(exc.filename) != str(cwd)
    if not missing or interpreter is None:
        return start_reason(exc, script)
    reason = f"its #! line names {interpreter!r}, which does not exist"
    if interpreter.endswith("\r"):
        reason += " (the file has Windows CRLF line endings)"
    return reason
