"""Labs and their files: the labs this installation can grade, and what a ``lab.toml`` says.

Also the few facts every other layer shares, free of the kubernetes client: what
reading the cluster can fail with (``errors``), bounded waits (``waiting``) and where
a kind of object lives in the API (``kinds``). Nothing here imports the rest of the
package. Usable without pytest::

    from pytest_gpulab.labs import discover
    lab = discover().get("gpuop")
"""

from .discovery import ENTRY_POINT_GROUP, Catalog, UnknownLab, discover, lab_folders

__all__ = ["ENTRY_POINT_GROUP", "Catalog", "UnknownLab", "discover", "lab_folders"]
