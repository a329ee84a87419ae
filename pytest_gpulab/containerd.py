"""The fake ``containerd`` a grader puts first on PATH for a learner's script.

``FakeContainerd(directory)`` writes a small launcher at
``directory/bin/containerd`` that runs the shipped stand-in
(``fake_containerd/containerd``) with its state in ``directory/state``. The
grader chooses what ``containerd config dump`` prints (``serve_dump`` for a
shipped dump by name, ``serve_text`` for TOML text, ``serve_path`` for a
file), runs the script with ``bin_dir`` prepended to PATH and then reads back
every invocation the stand-in recorded.

``generate_dump()`` renders a realistic dump for any set of runtime handlers,
in the version-2 (containerd 1.7) or version-3 (containerd 2.x) layout.

Usable without pytest.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

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

# Global flags of the containerd CLI that take a value (kept in step with the
# stand-in script, which must not import this package).
GLOBAL_VALUE_FLAGS = frozenset({"--config", "-c", "--address", "-a", "--log-level", "-l", "--root", "--state"})


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


def strip_global_flags(argv: Iterable[str]) -> list[str] | None:
    """argv without its leading global flags; None if a flag lacks its value."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, _ = arg.partition("=")
        if eq and name in GLOBAL_VALUE_FLAGS:
            i += 1
        elif arg in GLOBAL_VALUE_FLAGS:
            if i + 1 >= len(args):
                return None
            i += 2
        else:
            break
    return args[i:]


class FakeContainerd:
    """A launcher directory plus the state the stand-in reads and writes."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.state_dir = self.directory / "state"
        self._bin_dir = self.directory / "bin"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._bin_dir.mkdir(parents=True, exist_ok=True)
        shim = shim_path()
        if not shim.is_file():
            raise FileNotFoundError(f"the fake containerd script is missing: {shim}")
        launcher = self._bin_dir / "containerd"
        launcher.write_text(
            "#!/bin/sh\n"
            "# Fake containerd for grading, written by pytest-gpulab.\n"
            f"{STATE_ENV}={shlex.quote(str(self.state_dir.resolve()))}\n"
            f"export {STATE_ENV}\n"
            f'exec {shlex.quote(sys.executable)} -I -S {shlex.quote(str(shim))} "$@"\n',
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


# ---------------------------------------------------------------------------
# Dump rendering
# ---------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_BINARY_NAMES = {
    "nvidia": "/usr/bin/nvidia-container-runtime",
    "nvidia-cdi": "/usr/bin/nvidia-container-runtime.cdi",
}


def _basic_string(text: str) -> str:
    out = []
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _string(text: str, version: int) -> str:
    """A TOML string as containerd prints it: "..." for v2, '...' for v3."""
    if version >= 3 and "'" not in text and not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        return f"'{text}'"
    return _basic_string(text)


def _key(name: str, version: int) -> str:
    return name if _BARE_KEY.fullmatch(name) else _string(name, version)


def _runtime_v2(name: str) -> str:
    table = f'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{_key(name, 2)}'
    binary = _BINARY_NAMES.get(name, "")
    return f"""
        [{table}]
          base_runtime_spec = ""
          cni_conf_dir = ""
          cni_max_conf_num = 0
          container_annotations = []
          pod_annotations = []
          privileged_without_host_devices = false
          privileged_without_host_devices_all_devices_allowed = false
          runtime_engine = ""
          runtime_path = ""
          runtime_root = ""
          runtime_type = "io.containerd.runc.v2"
          sandbox_mode = "podsandbox"
          snapshotter = ""

          [{table}.options]
            BinaryName = {_string(binary, 2)}
            CriuImagePath = ""
            CriuPath = ""
            CriuWorkPath = ""
            IoGid = 0
            IoUid = 0
            NoNewKeyring = false
            NoPivotRoot = false
            Root = ""
            ShimCgroup = ""
            SystemdCgroup = true
"""


def _runtime_v3(name: str) -> str:
    table = f"plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{_key(name, 3)}"
    binary = _BINARY_NAMES.get(name, "")
    return f"""
        [{table}]
          runtime_type = 'io.containerd.runc.v2'
          runtime_path = ''
          pod_annotations = []
          container_annotations = []
          privileged_without_host_devices = false
          privileged_without_host_devices_all_devices_allowed = false
          base_runtime_spec = ''
          cni_conf_dir = ''
          cni_max_conf_num = 0
          snapshotter = ''
          sandboxer = 'podsandbox'
          io_type = ''

          [{table}.options]
            BinaryName = {_string(binary, 3)}
            CriuImagePath = ''
            CriuWorkPath = ''
            IoGid = 0
            IoUid = 0
            NoNewKeyring = false
            Root = ''
            ShimCgroup = ''
            SystemdCgroup = true
"""


def _handlers(handlers: Iterable[str]) -> list[str]:
    if isinstance(handlers, str):
        raise TypeError("handlers must be an iterable of names, not a single string")
    names = sorted(set(handlers))
    if any(not isinstance(n, str) or not n for n in names):
        raise ValueError(f"handler names must be non-empty strings: {names!r}")
    return names


def render_runtimes(handlers: Iterable[str], version: int = 2) -> str:
    """Only the runtime tables (as a trimmed dump would show them)."""
    if version not in (2, 3):
        raise ValueError(f"containerd config version must be 2 or 3, not {version!r}")
    render = _runtime_v2 if version == 2 else _runtime_v3
    return "".join(render(name) for name in _handlers(handlers))


def generate_dump(
    handlers: Iterable[str],
    version: int = 2,
    default_runtime: str = "runc",
    imports: Iterable[str] = (),
) -> str:
    """A full ``containerd config dump`` with one runtime table per handler.

    ``version=2`` gives the containerd 1.7 layout
    (``plugins."io.containerd.grpc.v1.cri".containerd.runtimes.*``),
    ``version=3`` the containerd 2.x one
    (``plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.*``).
    ``nvidia`` and ``nvidia-cdi`` get the toolkit's BinaryName; any other
    handler gets runc.v2 defaults. Names outside [A-Za-z0-9_-] are quoted.
    """
    if version not in (2, 3):
        raise ValueError(f"containerd config version must be 2 or 3, not {version!r}")
    # Templates of a real `config dump`: containerd 1.7 for version 2 (keys sorted,
    # double quotes), containerd 2.0 for version 3 (struct order, single quotes;
    # the CRI runtime settings live in io.containerd.cri.v1.runtime).
    template = (_package_dir() / "templates" / f"config-v{version}.toml.in").read_text(encoding="utf-8")
    imports_toml = "[" + ", ".join(_string(i, version) for i in imports) + "]"
    return (
        template.replace("@IMPORTS@", imports_toml)
        .replace("@DEFAULT@", _string(default_runtime, version))
        .replace("@RUNTIMES@", render_runtimes(handlers, version))
    )
