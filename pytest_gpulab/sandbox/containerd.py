"""The fake ``containerd`` a grader puts first on PATH for a learner's script.

``FakeContainerd(directory)`` writes a small launcher at
``directory/bin/containerd`` that runs the shipped stand-in
(``fake_containerd/containerd``) with its state in ``directory/state``. The
grader chooses what ``containerd config dump`` prints (``serve_dump`` for a
shipped dump by name, ``serve_text`` for TOML text, ``serve_path`` for a
file), runs the script with ``bin_dir`` prepended to PATH and then reads back
every invocation the stand-in recorded.

``generate_dump()`` (``containerd_dumps``, re-exported here) renders a realistic dump for any set of
runtime handlers, in the version-2 (containerd 1.7) or version-3 (containerd 2.x) layout. The stand-in's
flags have one definition, ``fake_containerd/containerd_flags.py``, which both read.

Usable without pytest.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

from ..fake_containerd.containerd_flags import GLOBAL_VALUE_FLAGS, strip_global_flags
from .containerd_dumps import generate_dump, render_runtimes

__all__ = [
    "GLOBAL_VALUE_FLAGS",
    "FakeContainerd",
    "available_dumps",
    "dump_path",
    "generate_dump",
    "render_runtimes",
    "shim_path",
    "strip_global_flags",
]

STATE_ENV = "GPULAB_FAKE_CONTAINERD_STATE"


def _package_dir() -> Path:
    return Path(str(resources.files("pytest_gpulab.fake_containerd")))


def shim_path() -> Path:
    """Path of the shipped stand-in script."""
    return _package_dir() / "containerd"


def available_dumps() -> list[str]:
    """Names (file stems) of the shipped dumps, sorted."""
    dumps = _package_dir() / "dumps"
    return sorted(p.stem for p in dumps.glob("*.toml") if p.is_file())


def dump_path(name: str) -> Path:
    """Path of a shipped dump, by stem (``v2-runc-nvidia``) or file name."""
    stem = name[:-5] if name.endswith(".toml") else name
    if stem not in available_dumps():
        raise KeyError(f"no shipped containerd dump named {name!r}")
    return _package_dir() / "dumps" / f"{stem}.toml"


class FakeContainerd:
    """A launcher directory plus the state the stand-in reads and writes."""

    def __init__(self, directory: Path, *, python: str = sys.executable, program: Path | None = None) -> None:
        """``python`` runs ``program`` (the shipped stand-in unless given a copy of it, beside its flags)."""
        self.directory = Path(directory)
        self.state_dir = self.directory / "state"
        self._bin_dir = self.directory / "bin"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._bin_dir.mkdir(parents=True, exist_ok=True)
        shim = program or shim_path()
        if not shim.is_file():
            raise FileNotFoundError(f"the fake containerd script is missing: {shim}")
        launcher = self._bin_dir / "containerd"
        launcher.write_text(
            "#!/bin/sh\n"
            "# Fake containerd for grading, written by pytest-gpulab.\n"
            f"{STATE_ENV}={shlex.quote(str(self.state_dir.resolve()))}\n"
            f"export {STATE_ENV}\n"
            f'exec {shlex.quote(python)} -I -S {shlex.quote(str(shim))} "$@"\n',
            encoding="utf-8",
        )
        launcher.chmod(0o755)
        self.executable = launcher

    def __repr__(self) -> str:
        return f"FakeContainerd({str(self.directory)!r})"

    @property
    def bin_dir(self) -> Path:
        """Directory holding ``containerd``; prepend it to PATH."""
        return self._bin_dir

    @property
    def dump_file(self) -> Path:
        return self.state_dir / "dump.toml"

    @property
    def calls_file(self) -> Path:
        return self.state_dir / "calls.jsonl"

    # -- what `config dump` prints -------------------------------------------

    def serve_dump(self, name: str) -> Path:
        """Serve a shipped dump, by stem (``v2-runc-nvidia``) or file name.

        Raises KeyError, naming the shipped dumps, for an unknown name: a
        misspelled name is never served as TOML text (use ``serve_text``).
        """
        try:
            path = dump_path(name)
        except KeyError:
            raise KeyError(
                f"no shipped containerd dump named {name!r}; available: {', '.join(available_dumps())}"
            ) from None
        return self.serve_path(path)

    def serve_text(self, text: str) -> Path:
        """Serve the given TOML text."""
        self.dump_file.write_text(text, encoding="utf-8")
        return self.dump_file

    def serve_path(self, path: Path) -> Path:
        """Serve the bytes of a file."""
        shutil.copyfile(Path(path), self.dump_file)
        return self.dump_file

    # -- what the script asked -----------------------------------------------

    def calls(self) -> list[list[str]]:
        """The argv (after the program name) of every invocation so far."""
        try:
            raw = self.calls_file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        calls = []
        for line in raw.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            argv = entry.get("argv") if isinstance(entry, dict) else None
            if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
                calls.append(argv)
        return calls

    def reset_calls(self) -> None:
        self.calls_file.unlink(missing_ok=True)

    def asked_for_config_dump(self) -> bool:
        """Whether any invocation was ``[global flags] config dump ...``."""
        for argv in self.calls():
            rest = strip_global_flags(argv)
            if rest is not None and rest[:2] == ["config", "dump"]:
                return True
        return False
