"""Where a script finds what it is given when no sandbox could be made and a root grader runs it as a uid
of its own (:mod:`pytest_gpulab.sandbox.confine`, ``Sandbox("none", RUN_UIDS)``).

Without namespaces nothing is bound in: the script sees the machine's files with that uid's rights, and the
grader's lie in folders no other uid may enter (a bundle's 0700 temporary folder, pytest's own). So the
runner makes one folder for its runs (``gpulab-run-*``, 0711: entered, never listed) holding one of an
unguessable name (0755, the grader's): there the lab root's snapshot, and each run's own folder with a copy
of a script from elsewhere, copies of the files named in its arguments, a fake containerd of its own (whose
record is added to the grader's after the run) and an empty scratch directory owned by the run's uid, where
it starts; for a script that reads the cluster, its door's kubeconfig and ``kubectl``. The uid reads all
of it and writes only its scratch directory and its fake's record; the run's folder goes when it ends.
Usable without pytest.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .confine import snapshot
from .containerd import FakeContainerd, shim_path

if TYPE_CHECKING:
    from .clusterview import Door

__all__ = ["Stage", "StagedRun"]


@dataclass(frozen=True)
class StagedRun:
    """One run's reachable copies: run ``script`` with ``args`` in ``scratch``, with ``fake`` on PATH."""

    folder: Path
    script: Path
    args: tuple[str, ...]
    fake: FakeContainerd
    scratch: Path
    door: Door | None

    def end(self, grader_s: FakeContainerd) -> None:
        """The calls the run's fake recorded added to the grader's record; the run's folder removed."""
        try:
            calls = self.fake.calls_file.read_bytes()  # bounded by the run's file size limit
        except OSError:
            calls = b""
        if calls:
            with grader_s.calls_file.open("ab") as record:
                record.write(calls if calls.endswith(b"\n") else calls + b"\n")
        shutil.rmtree(self.folder, ignore_errors=True)


class Stage:
    """The runner's reachable folder, made by its first staged run and removed by :meth:`close`."""

    def __init__(self, lab_root: Path | None) -> None:
        self.lab_root = lab_root
        self._top: Path | None = None
        self._inside: Path | None = None
        self._lock = threading.RLock()

    def inside(self) -> Path:
        with self._lock:
            if self._inside is None:
                self._top = Path(tempfile.mkdtemp(prefix="gpulab-run-"))
                self._top.chmod(0o711)
                self._inside = _folder(self._top / secrets.token_hex(16))
            return self._inside

    def _lab(self) -> Path:
        assert self.lab_root is not None
        with self._lock:
            return snapshot(self.lab_root, self.inside() / "lab")

    def _kubectl(self, tools: Path) -> Path:
        """The tools' ``kubectl``, copied once (the grader's cache may sit in a home no other uid enters)."""
        with self._lock:
            folder = _folder(self.inside() / "tools")
            if not (folder / "kubectl").exists():
                _copy(tools / "kubectl", folder / "kubectl")
            return folder

    def _program(self) -> Path:
        """The fake containerd's program and its flags, copied once (the package may sit in such a home)."""
        with self._lock:
            folder = _folder(self.inside() / "fake-containerd")
            if not (folder / "containerd").exists():
                _copy(shim_path().with_name("containerd_flags.py"), folder / "containerd_flags.py")
                _copy(shim_path(), folder / "containerd")
            return folder / "containerd"

    def close(self) -> None:
        with self._lock:
            if self._top is not None:
                shutil.rmtree(self._top, ignore_errors=True)
            self._top = self._inside = None

    def run(self, script: Path, args: tuple[str, ...], fake: FakeContainerd, user: int, door: Door | None) -> StagedRun:
        """Reachable copies of what one run of ``script`` as ``user`` is given."""
        folder = _folder(Path(tempfile.mkdtemp(prefix="run-", dir=self.inside())))
        scratch = folder / "scratch"
        scratch.mkdir(mode=0o700)
        os.chown(scratch, user, user)
        if door is not None and door.kubeconfig is not None:
            door = replace(door, kubeconfig=_copy(door.kubeconfig, folder / "kubeconfig"))
        _folder(folder / "given")
        given = tuple(self._given(arg, folder / "given" / str(n)) for n, arg in enumerate(args))
        copied = Path(self._given(str(script), folder / "script"))
        return StagedRun(folder, copied, given, self._fake(folder / "fake-containerd", fake, user), scratch, door)

    def _fake(self, directory: Path, grader_s: FakeContainerd, user: int) -> FakeContainerd:
        """A fake containerd of the run's own, serving the grader's dump; its record the one file ``user`` writes."""
        staged = FakeContainerd(directory, python=_python(), program=self._program())
        if grader_s.dump_file.exists():
            staged.serve_path(grader_s.dump_file)
        staged.calls_file.touch()
        os.chown(staged.calls_file, user, user)
        for path in (staged.directory, staged.state_dir, staged.bin_dir, staged.dump_file):
            if path.exists():
                path.chmod(0o755 if path.is_dir() else 0o644)
        return staged

    def _given(self, arg: str, into: Path) -> str:
        """A file's path, from where the run's uid may read it (a copy); any other argument as it is."""
        if not (arg.startswith("/") and os.path.isfile(arg)):  # no socket, no device
            return arg
        path = Path(arg)
        if self.lab_root is not None and self.lab_root in path.parents:
            return str(self._lab() / path.relative_to(self.lab_root))
        return str(_copy(path, _folder(into) / path.name))

    def tools(self, prefix: list[Path], toolchain_bin: Path) -> list[Path]:
        """PATH's additions, the toolchain's folder replaced by the stage's ``kubectl``."""
        if not (toolchain_bin / "kubectl").is_file():
            return prefix
        return [self._kubectl(toolchain_bin) if entry == toolchain_bin else entry for entry in prefix]


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def _copy(source: Path, target: Path) -> Path:
    """``source``'s bytes at ``target``, the grader's, readable (and executable where it was) by all."""
    shutil.copyfile(source, target)
    target.chmod(0o755 if os.access(source, os.X_OK) and source.stat().st_mode & 0o111 else 0o644)
    return target


def _python() -> str:
    """A Python the run's uid may start: the grader's, unless it lies in a folder others may not enter
    (a pyenv in root's home), then the system's (the fake containerd needs only the standard library)."""
    for candidate in (sys.executable, shutil.which("python3", path=os.defpath)):
        if candidate and _others_may_run(Path(candidate)):
            return candidate
    return sys.executable


def _others_may_run(path: Path) -> bool:
    real = path.resolve()
    return all(folder.stat().st_mode & 0o001 for folder in real.parents) and real.stat().st_mode & 0o005 == 0o005
