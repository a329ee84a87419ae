"""pytest-gpulab: grade hands-on GPU-operations labs on a real (kwok) Kubernetes control plane.

PYTEST_DONT_REWRITE: a warm grading (``cohort/warm.py``) has the package imported before pytest starts.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Imported on first use: the kubernetes client alone takes ~0.4 s, and every pytest run
# that has this plugin installed imports the package.
_EXPORTS = {
    "FakeContainerd": "sandbox.containerd",
    "KwokCluster": "cluster.kwok",
    "KwokClusterError": "cluster.kwok",
    "LiveCluster": "grading.live",
    "StepFailed": "grading.feedback",
    "expect": "grading.feedback",
    "fail": "grading.feedback",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pytest_gpulab' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
