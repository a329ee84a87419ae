"""pytest-gpulab: grade hands-on GPU-operations labs on a real (kwok) Kubernetes control plane."""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Imported on first use: the kubernetes client alone takes ~0.4 s, and every pytest run
# that has this plugin installed imports the package.
_EXPORTS = {
    "FakeContainerd": "containerd",
    "KwokCluster": "kwok",
    "KwokClusterError": "kwok",
    "LiveCluster": "live",
    "StepFailed": "feedback",
    "expect": "feedback",
    "fail": "feedback",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pytest_gpulab' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
