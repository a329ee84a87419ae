"""A realistic ``containerd config dump`` for any set of runtime handlers, in the version-2 (containerd
1.7) or version-3 (containerd 2.x) layout, from the templates shipped with the fake containerd.
Usable without pytest::

    generate_dump(["runc", "nvidia"], version=3)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path


def _templates() -> Path:
    return Path(str(resources.files("pytest_gpulab.fake_containerd"))) / "templates"


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

    Example:: generate_dump({"runc", "nvidia"}, version=3)
    """
    if version not in (2, 3):
        raise ValueError(f"containerd config version must be 2 or 3, not {version!r}")
    # Templates of a real `config dump`: containerd 1.7 for version 2 (keys sorted,
    # double quotes), containerd 2.0 for version 3 (struct order, single quotes;
    # the CRI runtime settings live in io.containerd.cri.v1.runtime).
    template = (_templates() / f"config-v{version}.toml.in").read_text(encoding="utf-8")
    imports_toml = "[" + ", ".join(_string(i, version) for i in imports) + "]"
    return (
        template.replace("@IMPORTS@", imports_toml)
        .replace("@DEFAULT@", _string(default_runtime, version))
        .replace("@RUNTIMES@", render_runtimes(handlers, version))
    )
