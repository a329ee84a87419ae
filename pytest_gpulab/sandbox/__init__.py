"""The sandbox and learner scripts: a learner's script run by bubblewrap with nothing but its own
snapshot of the lab root, the tools on PATH, the fake containerd and a read-only view of its cluster.

``confine`` decides the sandbox (root, user namespace or none) and ``bwrap`` builds its command;
``runner`` runs a script in it; ``clusterview`` and ``doctor`` serve the read-only view, reached
inside through ``forward``; ``containerd`` controls the fake containerd the scripts call.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import Any


def __getattr__(name: str) -> Any:
    """``pytest_gpulab.sandbox`` was the module ``confine`` is now: its names still work, for one release."""
    if name.startswith("__"):
        raise AttributeError(name)
    value = getattr(import_module(".confine", __name__), name)
    warnings.warn(
        f"{__name__}.{name} moved to {__name__}.confine.{name} (the old path goes in 0.2)",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
