"""A real node for a lab cluster: a kubelet, containerd 2.x and runc built from the pinned Go modules
(``gpulab build --node``), joined to the cluster's API server, to run the grading Job's Pods as a real
cluster's node would (``gpulab node up``, ``gpulab node down``). Usable without pytest."""

from .configs import PAUSE_IMAGE, NodeOptions
from .images import ImageError
from .lifecycle import NodeError, RealNode

__all__ = ["PAUSE_IMAGE", "ImageError", "NodeError", "NodeOptions", "RealNode"]
