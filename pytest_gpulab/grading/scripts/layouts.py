"""What a learner script sees in its sandbox: the lab root as a read-only snapshot, the fake containerd, the tools on
PATH, the files the grader names in its arguments, empty writable blanks, a kept state's folders, and the view's
socket for a script that reads the cluster. Usable without pytest."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ...sandbox.bwrap import blanks_for, view_kubeconfig, write_etc
from ...sandbox.confine import Exposure, Layout, Sandbox, snapshot, tool_paths
from ...sandbox.containerd import FakeContainerd, shim_path
from ...sandbox.runner import SandboxPlan
from .keeps import Keeps, kept_places

if TYPE_CHECKING:
    from ...sandbox.clusterview import Door


class RunLayouts:
    """The layouts of one runner's runs: ``lab_root`` is snapshotted once (under ``lock``) below ``work``."""

    def __init__(self, sandbox: Sandbox | None, lab_root: Path | None, work: Path, lock: threading.Lock) -> None:
        self.sandbox, self.lab_root, self.work, self.lock = sandbox, lab_root, work, lock

    def exposures(
        self, script: Path, args: tuple[str, ...], fake: FakeContainerd, env: dict[str, str], keeps: Keeps
    ) -> list[Exposure]:
        """The lab root (or the script's own folder) as a read-only snapshot; the fake containerd, read-only
        but for the one file it records calls in; the tools on PATH; and the files the grader names in its
        arguments (a generated dump), read-only."""
        root = self.lab_root
        if root is not None and root in script.parents:
            with self.lock:
                seen = [Exposure(snapshot(root, self.work / "lab-snapshot"), root)]
        else:
            seen = [Exposure(script.parent, script.parent)]
        seen += [Exposure(fake.directory, fake.directory), Exposure(fake.calls_file, fake.calls_file, read_only=False)]
        seen += [Exposure(tool, tool) for tool in tool_paths(env.get("PATH", "")) if tool != Path("/")]
        seen.append(Exposure(shim_path().parent, shim_path().parent))
        given = [Path(arg) for arg in args if arg.startswith("/") and os.path.isfile(arg)]  # no socket, no device
        given = [path for path in given if root is None or root not in path.parents]
        if keeps.writable_inputs:  # copies in folders of their own: writable whole, so sed -i's temporary file shows
            return seen + [Exposure(folder, folder, read_only=False) for folder in {path.parent for path in given}]
        return seen + [Exposure(path, path) for path in given]

    def plan(
        self,
        script: Path,
        args: tuple[str, ...],
        fake: FakeContainerd,
        scratch: Path,
        env: dict[str, str],
        door: Door | None,
        user: int | None,
        keeps: Keeps,
    ) -> SandboxPlan | None:
        """What the script sees in the sandbox: its exposures, empty writable blanks (its scratch among
        them), and for a script that reads the cluster the view's socket behind a forwarder; with a kept
        ``state``, its folders in place of the /tmp-like blanks, $HOME and the scratch."""
        if self.sandbox is None:
            return None
        fake.calls_file.touch()
        if user is not None:
            for writable in (fake.calls_file, scratch):  # the scratch directory matters where no sandbox is
                os.chown(writable, user, user)
        seen = self.exposures(script, args, fake, env, keeps)
        seen += [Exposure(source, scratch / name, not keeps.writable_inputs) for name, source in keeps.inputs]
        blanks = blanks_for(self.lab_root, env.get("HOME"), scratch, seen)
        extra: dict[str, str] = {}
        if keeps.state is not None:
            kept = kept_places(keeps.state, env.get("HOME"), scratch, user)
            blanks = tuple(blank for blank in blanks if blank not in kept)
            seen += [Exposure(source, inside, read_only=False) for inside, source in kept.items()]
            extra["TMPDIR"] = "/tmp"
        layout = Layout(
            tuple(seen), blanks, scratch, write_etc(scratch.parent / "etc", user),
            cluster_socket=door.socket if door is not None else None,  # none: nothing answers
            kubeconfig=view_kubeconfig(self.work / "sandbox") if door is not None else None, run_user=user,
            extra_env=extra,
        )  # fmt: skip
        return SandboxPlan(self.sandbox, layout)
