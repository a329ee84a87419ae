"""A submission bundle: a learner's lab root and their cluster's snapshot, in one ``.tar.gz``.

Members, in this order::

    gpulab-bundle.json     the manifest: lab, rubric, the root's absolute path, tool versions, every member's size
                           and sha256
    cluster/etcd.db        the cluster's etcd snapshot (``snapshot.py``)
    root/<path>            each regular file of the lab root (the manifest lists its folders too)

The lab root is walked without following links and only regular files are taken,
each and all of them bounded in size; whatever is left out is listed in the
manifest's ``refused`` with the reason. The manifest's ``checksum`` is the sha256
of the manifest without it: it finds a bundle damaged in transit, not one forged.
Usable without pytest: :func:`write_bundle`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ..cluster import snapshot, toolchain
from ..cluster.kwok import KwokCluster
from ..labs.labfile import Lab

FORMAT = 1
MANIFEST = "gpulab-bundle.json"
SNAPSHOT = "cluster/etcd.db"
ROOT = "root/"
SUFFIX = ".gpulab.tar.gz"


class BundleError(Exception):
    """The bundle cannot be written as a grader would take it; says why."""


@dataclass(frozen=True)
class Limits:
    """What a bundle may hold; a reader refuses more, a writer leaves the excess out and lists it."""

    file_bytes: int = 4 << 20
    root_bytes: int = 32 << 20
    files: int = 2000
    dirs: int = 2000
    snapshot_bytes: int = 512 << 20
    manifest_bytes: int = 4 << 20
    bundle_bytes: int = 256 << 20  # the compressed file


LIMITS = Limits()


@dataclass
class RootFiles:
    """The lab root's files that go in, and those that do not, with why."""

    files: list[tuple[str, bytes, bool]] = field(default_factory=list)  # path, contents, executable
    dirs: list[str] = field(default_factory=list)  # every folder, so an empty one (or one named as a file) stays
    refused: list[dict[str, str]] = field(default_factory=list)
    total: int = 0


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_checksum(manifest: dict[str, Any]) -> str:
    body = {key: value for key, value in manifest.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _read(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes, not following a link put there since the walk saw a file."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as stream:  # a FIFO: no wait
        return stream.read(limit + 1)


def _take(found: RootFiles, relative: str, entry: os.DirEntry[str], executable: bool, limits: Limits) -> None:
    def refuse(reason: str) -> None:
        found.refused.append({"path": relative, "reason": reason})

    if len(found.files) >= limits.files:
        return refuse(f"more than {limits.files} files")
    try:
        data = _read(entry.path, limits.file_bytes)  # the manifest's sha256 is of these very bytes
    except OSError as error:
        return refuse(f"cannot be read: {error.strerror}")
    if len(data) > limits.file_bytes:
        return refuse(f"larger than {limits.file_bytes >> 20} MiB")
    if found.total + len(data) > limits.root_bytes:
        return refuse(f"the root's files pass {limits.root_bytes >> 20} MiB")
    found.files.append((relative, data, executable))
    found.total += len(data)


def _walk(directory: Path, prefix: str, found: RootFiles, limits: Limits) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as error:
        found.refused.append({"path": prefix or ".", "reason": f"cannot be read: {error.strerror}"})
        return
    for entry in entries:
        relative = f"{prefix}{entry.name}"
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as error:  # a path too long, or gone since the listing
            found.refused.append({"path": relative, "reason": f"cannot be read: {error.strerror}"})
            continue
        if stat.S_ISLNK(mode):
            found.refused.append({"path": relative, "reason": "a symbolic link (links are not followed)"})
        elif stat.S_ISDIR(mode) and len(found.dirs) >= limits.dirs:
            found.refused.append({"path": relative, "reason": f"more than {limits.dirs} folders"})
        elif stat.S_ISDIR(mode):
            found.dirs.append(relative)
            _walk(Path(entry.path), relative + "/", found, limits)
        elif stat.S_ISREG(mode):
            _take(found, relative, entry, bool(mode & 0o111), limits)
        else:
            found.refused.append({"path": relative, "reason": "not a regular file"})


REFUSALS_LISTED = 200  # the rest are counted, so that the manifest stays small


def _list_at_most(refused: list[dict[str, str]], listed: int) -> list[dict[str, str]]:
    if len(refused) <= listed:
        return refused
    return [*refused[:listed], {"path": "...", "reason": f"and {len(refused) - listed} more left out"}]


def root_files(root: Path, limits: Limits = LIMITS) -> RootFiles:
    found = RootFiles()
    _walk(root, "", found, limits)
    found.refused = _list_at_most(found.refused, REFUSALS_LISTED)
    return found


def tool_versions() -> dict[str, str]:
    pins = toolchain.pinned_versions()
    return {"gpulab": metadata.version("pytest-gpulab"), "kubernetes": pins.kubernetes, "etcd": pins.etcd,
            "kwok": pins.kwok}  # fmt: skip


def _file_entry(relative: str, data: bytes, executable: bool) -> dict[str, Any]:
    return {"path": relative, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "executable": executable}


def _manifest(lab: Lab, learner: str | None, found: RootFiles, snapshot_path: Path, root: str | None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "lab": lab.name,
        "rubric_version": lab.rubric_version,
        "learner": learner,
        "root": root,  # where the lab root stood: paths the learner wrote under it are read from the bundle's copy
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tools": tool_versions(),
        "snapshot": {
            "path": SNAPSHOT,
            "format": "etcd",
            "bytes": snapshot_path.stat().st_size,
            "sha256": sha256_file(snapshot_path),
        },
        "files": [_file_entry(*file) for file in found.files],
        "dirs": found.dirs,
        "refused": found.refused,
    }
    manifest["checksum"] = manifest_checksum(manifest)
    return manifest


def _add(archive: tarfile.TarFile, name: str, source: Path | bytes, executable: bool = False) -> None:
    info = tarfile.TarInfo(name)
    info.mode = 0o755 if executable else 0o644
    info.mtime = int(time.time())
    if isinstance(source, bytes):
        info.size = len(source)
        archive.addfile(info, io.BytesIO(source))
    else:
        info.size = source.stat().st_size
        with open(source, "rb") as stream:
            archive.addfile(info, stream)


def pack(
    lab: Lab,
    found: RootFiles,
    snapshot_path: Path,
    out: Path,
    *,
    learner: str | None = None,
    limits: Limits = LIMITS,
    root: str | None = None,
) -> dict[str, Any]:
    """The bundle of these root files and this snapshot, written to ``out`` atomically; its manifest. ``root`` is
    the absolute path the files were taken from."""
    if snapshot_path.stat().st_size > limits.snapshot_bytes:
        raise BundleError(f"the cluster's snapshot is larger than {limits.snapshot_bytes >> 20} MiB")
    manifest = _manifest(lab, learner, found, snapshot_path, root)
    while len(json.dumps(manifest, indent=2)) > limits.manifest_bytes and len(found.refused) > 1:
        found.refused = _list_at_most(found.refused, len(found.refused) // 2)  # the reader's limit
        manifest = _manifest(lab, learner, found, snapshot_path, root)
    partial = out.with_name(f".{out.name}.partial")
    with tarfile.open(partial, "w:gz") as archive:
        _add(archive, MANIFEST, json.dumps(manifest, indent=2).encode())
        _add(archive, SNAPSHOT, snapshot_path)
        for relative, data, executable in found.files:
            _add(archive, ROOT + relative, data, executable)
    if partial.stat().st_size > limits.bundle_bytes:
        partial.unlink()
        raise BundleError(f"the bundle would be larger than {limits.bundle_bytes >> 20} MiB")
    os.replace(partial, out)
    return manifest


def write_bundle(
    lab: Lab, root: Path, cluster: KwokCluster, out: Path, *, learner: str | None = None, limits: Limits = LIMITS
) -> dict[str, Any]:
    """Write the bundle of ``root`` and ``cluster``'s snapshot to ``out`` (atomically); return its manifest."""
    found = root_files(root, limits)
    with tempfile.TemporaryDirectory(prefix="gpulab-bundle-") as work:
        snapshot_path = Path(work) / "etcd.db"
        snapshot.save(cluster, snapshot_path)
        return pack(lab, found, snapshot_path, out, learner=learner, limits=limits, root=str(Path(root).absolute()))
