"""Images for a real node without a registry: the pause image from kubernetes' own ``pause.c``, and images
podman holds (the grader's, from ``scripts/image-build``), as archives ``ctr images import`` takes."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from .configs import PAUSE_IMAGE


class ImageError(RuntimeError):
    """An image could not be made or saved for the node."""


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def pause_archive(pause_binary: Path, into: Path) -> Path:
    """A docker-archive of ``PAUSE_IMAGE``: one layer holding ``/pause``, its entry point."""
    layer = _tar({"pause": (pause_binary.read_bytes(), 0o755)})
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    config_bytes = json.dumps(config).encode()
    manifest = [{"Config": "config.json", "RepoTags": [PAUSE_IMAGE], "Layers": ["layer.tar"]}]
    files = {"config.json": (config_bytes, 0o644), "layer.tar": (layer, 0o644),
             "manifest.json": (json.dumps(manifest).encode(), 0o644)}  # fmt: skip
    path = into / "pause.tar"
    path.write_bytes(_tar(files))
    return path


def podman_archive(image: str, into: Path) -> Path:
    """``podman save`` of ``image`` as a docker-archive, which keeps its name for ``ctr images import``."""
    path = into / f"{hashlib.sha256(image.encode()).hexdigest()[:12]}.tar"
    saved = subprocess.run(
        ["podman", "save", "--format", "docker-archive", "-o", str(path), image],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if saved.returncode != 0:
        raise ImageError(f"podman could not save {image} for the node: {saved.stderr.strip()[-500:]}")
    return path
