"""pytest-gpulab: grade hands-on GPU-operations labs on a real (kwok) Kubernetes control plane."""

from .containerd import FakeContainerd
from .feedback import StepFailed, expect, fail
from .kwok import KwokCluster, KwokClusterError
from .live import LiveCluster

__all__ = ["FakeContainerd", "KwokCluster", "KwokClusterError", "LiveCluster", "StepFailed", "expect", "fail"]
