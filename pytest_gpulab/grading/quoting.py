"""Quoting what a learner wrote or printed, bounded: the head of a text or a file, line by line, with secrets
(private keys, tokens, kubeconfig credentials) blanked and every cut marked. Usable without pytest.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

LINES = 12  # lines quoted of a file
LINE_CHARS = 160  # characters of one quoted line
CUT = "...(cut)"
SECRET = re.compile(
    r"(-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|(token|password|client-key-data|client-certificate-data|certificate-authority-data)(\"?\s*[:=]\s*)\S+)",
    re.S | re.I,
)


def head(text: str, chars: int) -> tuple[str, bool]:
    """The first ``chars`` characters of ``text``, secrets blanked; and whether it was cut."""
    text = SECRET.sub(lambda m: f"{m.group(3)}{m.group(4)}(secret)" if m.group(3) else "(secret)", text)
    return (text, False) if len(text) <= chars else (text[:chars] + CUT, True)


def quoted_lines(text: str, count: int = LINES) -> dict[str, Any]:
    """The first ``count`` lines, numbered, each bounded; how many there are, and whether any was cut."""
    lines = text.splitlines()
    kept = []
    cut = len(lines) > count
    for number, line in enumerate(lines[:count], 1):
        shown, short = head(line, LINE_CHARS)
        kept.append(f"{number}: {shown}")
        cut = cut or short
    return {"lines": kept, "line_count": len(lines), **({"cut": True} if cut else {})}


def file_head(path: Path) -> dict[str, Any]:
    """The quoted head of a regular file, read without blocking (never a FIFO's or a device's), or that it is not
    a file there."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return {"exists": False}
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            return {"exists": False}
        data = os.read(handle, LINES * (LINE_CHARS + 1))
    except OSError:
        return {"exists": False}
    finally:
        os.close(handle)
    quoted = quoted_lines(data.decode("utf-8", "replace"))
    return {**quoted, "cut": True, "line_count": None} if status.st_size > len(data) else quoted
