"""kubectl's discovery, read once for a view: a warm cache that a script's kubectl reads, and cannot write.

Each kubectl call first asks the API server which kinds it serves (``/api`` and ``/apis``, some hundred KB of
JSON relayed through the view and the run's forwarder) unless its discovery cache holds a fresh answer (six hours,
kubectl's own bound). A run's $HOME is empty, so every call of every run asked again: in gpunode's check, most of
a kubectl's time. The view asks once instead, with the pinned kubectl against the cluster it serves (the same
kinds: a view hides objects, never kinds), into a folder named for the address a sandboxed script reaches it at.
That folder is bound read-only into each run on a working view, named by KUBECACHEDIR: a script cannot leave
anything there for a later run, and one that names a cache of its own (``--cache-dir``) gets what it asks. A run
on a failing API server gets no cache, so that it meets the failure with its very first read, as without one.
Usable without pytest.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ..cluster import toolchain
from ..cluster.environ import environ_now

FILL_TIMEOUT = 30.0


def cache_folder(server: str) -> str:
    """The folder kubectl keeps a server's discovery in (client-go's ``computeDiscoverCacheDir``)."""
    host = server.replace("https://", "", 1).replace("http://", "", 1)
    return re.sub(r"[^(\w/.)]", "_", host)


def fill(folder: Path, kubeconfig: str | Path, server_inside: str) -> Path | None:
    """``folder``, a kubectl cache holding the discovery of the cluster ``kubeconfig`` names, as a script that
    reaches it at ``server_inside`` looks it up, readable by all; None when kubectl could not read it (the runs
    then ask, as before)."""
    work = folder.with_name(folder.name + ".filling")
    shutil.rmtree(work, ignore_errors=True)
    command = [str(toolchain.bin_dir() / "kubectl"), f"--kubeconfig={kubeconfig}", f"--cache-dir={work}"]
    env = {**environ_now(), "KUBECONFIG": str(kubeconfig)}
    try:
        done = subprocess.run(
            [*command, "api-resources", "-o", "name"], env=env, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=FILL_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        done = None
    found = [path for path in (work / "discovery").glob("*") if path.is_dir()]
    if done is None or done.returncode != 0 or len(found) != 1:
        shutil.rmtree(work, ignore_errors=True)
        return None
    (folder / "discovery").mkdir(parents=True)
    found[0].rename(folder / "discovery" / cache_folder(server_inside))
    shutil.rmtree(work, ignore_errors=True)
    _readable(folder)
    return folder


def _readable(folder: Path) -> None:
    """Folders 0755 and files 0644, up to ``folder``: a run's uid reads them through its read-only mount."""
    folder.chmod(0o755)
    for parent, folders, files in os.walk(folder):
        for name in folders:
            os.chmod(os.path.join(parent, name), 0o755)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o644)
