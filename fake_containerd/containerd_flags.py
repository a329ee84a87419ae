"""The containerd CLI's global flags, as the stand-in reads them and the grader reads its record.

One definition for both: the stand-in script imports it from beside itself (it runs isolated,
``python -I -S``, and imports nothing of pytest_gpulab), and ``pytest_gpulab.sandbox.containerd`` imports it
as ``pytest_gpulab.fake_containerd.containerd_flags``. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable

# Global flags that take a value, as ``--flag VALUE`` or ``--flag=VALUE``.
GLOBAL_VALUE_FLAGS = frozenset({"--config", "-c", "--address", "-a", "--log-level", "-l", "--root", "--state"})
VERSION_WORDS = frozenset({"--version", "-v", "version"})


def strip_global_flags(argv: Iterable[str]) -> list[str] | None:
    """argv without its leading global flags; None if a flag lacks its value."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, _ = arg.partition("=")
        if eq and name in GLOBAL_VALUE_FLAGS:
            i += 1
        elif arg in GLOBAL_VALUE_FLAGS:
            if i + 1 >= len(args):
                return None
            i += 2
        else:
            break
    return args[i:]
