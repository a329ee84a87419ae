"""Opening a submission bundle, which is untrusted input.

A bundle is read as a stream and each member checked before a byte of it is
written: the manifest first and whole; then only regular files, each a name the
manifest lists (``cluster/etcd.db`` or ``root/<a listed path>``), once, of the
size and sha256 it gives, under every limit of :class:`bundle.Limits`. Files are
written only below the directory given, under names made here from checked parts,
never from the archive's own. A bundle that is not gzip, not tar, truncated,
oversized, path-traversing or otherwise unlike what ``write_bundle`` makes is a
:class:`BundleRefused` with a sentence saying what is wrong.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from .bundle import FORMAT, LIMITS, MANIFEST, ROOT, SNAPSHOT, Limits, manifest_checksum

NAME_PART = re.compile(r"[^\x00/]{1,255}")


class BundleRefused(Exception):
    """The bundle cannot be graded; the message says why, for the instructor's records."""


@dataclass(frozen=True)
class OpenedBundle:
    manifest: dict[str, Any]
    root: Path  # the learner's lab root, as bundled
    snapshot: Path  # the cluster's etcd snapshot

    @property
    def lab(self) -> str:
        return str(self.manifest["lab"])


def _safe_relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if (
        name.startswith("/")
        or not path.parts
        or any(p in (".", "..") or not NAME_PART.fullmatch(p) for p in path.parts)
    ):
        raise BundleRefused(f"the bundle names a file outside its lab root: {name!r}")
    return path


def _check_manifest(manifest: Any) -> dict[str, Any]:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleRefused(f"the bundle's manifest is not of bundle format {FORMAT}")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise BundleRefused("the bundle's manifest does not match its checksum: the bundle was damaged or edited")
    files, shot = manifest.get("files"), manifest.get("snapshot")
    if not isinstance(manifest.get("lab"), str) or not isinstance(files, list) or not isinstance(shot, dict):
        raise BundleRefused("the bundle's manifest lacks its lab, files or snapshot")
    for entry in files:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("bytes"), int)):
            raise BundleRefused("the bundle's manifest lists a file without a path or size")
        _safe_relative(entry["path"])
    return manifest


def _copy(source: IO[bytes], target: Path, size: int, expected_sha256: Any) -> None:
    digest = hashlib.sha256()
    written = 0
    with open(target, "xb") as out:  # x: never through a file or link already there
        for block in iter(lambda: source.read(1 << 20), b""):
            written += len(block)
            if written > size:
                break
            digest.update(block)
            out.write(block)
    if written != size or digest.hexdigest() != expected_sha256:
        raise BundleRefused(f"{target.name} in the bundle does not match its manifest's size and sha256")


class _Reader:
    def __init__(self, into: Path, limits: Limits) -> None:
        self.into, self.limits = into, limits
        self.manifest: dict[str, Any] = {}
        self.expected: dict[str, dict[str, Any]] = {}
        self.total = 0

    def member(self, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        if not member.isfile():
            raise BundleRefused(f"the bundle holds {member.name!r}, which is not a regular file")
        if not self.manifest:
            return self._manifest(archive, member)
        entry = self.expected.pop(member.name, None)
        if entry is None:
            raise BundleRefused(f"the bundle holds {member.name!r}, which its manifest does not list (or lists once)")
        self.total += member.size
        if member.size != entry.get("bytes") or self.total > self.limits.snapshot_bytes + self.limits.root_bytes:
            raise BundleRefused(f"{member.name!r} in the bundle is not the size its manifest gives, or too large")
        target = self._target(member.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        source = archive.extractfile(member)
        assert source is not None  # a regular file's
        _copy(source, target, member.size, entry.get("sha256"))
        target.chmod(0o755 if entry.get("executable") else 0o644)

    def _manifest(self, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        if member.name != MANIFEST or member.size > self.limits.manifest_bytes:
            raise BundleRefused(f"the bundle does not start with its manifest ({MANIFEST})")
        source = archive.extractfile(member)
        assert source is not None
        try:
            self.manifest = _check_manifest(json.loads(source.read()))
        except (ValueError, UnicodeDecodeError):
            raise BundleRefused("the bundle's manifest is not JSON") from None
        self._expect()

    def _expect(self) -> None:
        files, shot = self.manifest["files"], self.manifest["snapshot"]
        if len(files) > self.limits.files or sum(entry["bytes"] for entry in files) > self.limits.root_bytes:
            raise BundleRefused(f"the bundle's lab root passes {self.limits.files} files or its size limit")
        if not isinstance(shot.get("bytes"), int) or shot["bytes"] > self.limits.snapshot_bytes:
            raise BundleRefused("the bundle's cluster snapshot is missing from its manifest or too large")
        self.expected = {ROOT + entry["path"]: entry for entry in files}
        if len(self.expected) != len(files):
            raise BundleRefused("the bundle's manifest lists a file twice")
        self.expected[SNAPSHOT] = shot

    def _target(self, name: str) -> Path:
        relative = PurePosixPath("root") / _safe_relative(name[len(ROOT) :]) if name != SNAPSHOT else "etcd.db"
        target = (self.into / relative).resolve()
        if not target.is_relative_to(self.into.resolve()):
            raise BundleRefused(f"the bundle names a file outside its lab root: {name!r}")
        return target


class _Bounded:
    """The decompressed stream, refused past ``limit`` bytes: tar headers are read whole into memory."""

    def __init__(self, stream: gzip.GzipFile, limit: int) -> None:
        self.stream, self.limit, self.read_so_far = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise BundleRefused(f"the bundle unpacks to more than {self.limit >> 20} MiB")
        return data


def open_bundle(path: Path, into: Path, limits: Limits = LIMITS) -> OpenedBundle:
    """Check and unpack the bundle below ``into`` (an empty directory of the grader's)."""
    if not path.is_file():
        raise BundleRefused(f"{path} is not a file")
    if path.stat().st_size > limits.bundle_bytes:
        raise BundleRefused(f"the bundle is larger than {limits.bundle_bytes >> 20} MiB")
    reader = _Reader(into, limits)
    (into / "root").mkdir(parents=True)
    unpacked_limit = limits.manifest_bytes + limits.snapshot_bytes + limits.root_bytes + (limits.files + 8) * 2048
    try:
        with gzip.open(path, "rb") as compressed:
            stream = _Bounded(compressed, unpacked_limit)
            with tarfile.open(fileobj=stream, mode="r|") as archive:  # type: ignore[call-overload]
                for member in archive:
                    reader.member(archive, member)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as error:
        raise BundleRefused(f"the bundle cannot be read as a gzip-compressed tar file ({error})") from None
    if not reader.manifest:
        raise BundleRefused("the bundle is empty")
    if reader.expected:
        raise BundleRefused(f"the bundle lacks {', '.join(sorted(reader.expected))}, which its manifest lists")
    return OpenedBundle(reader.manifest, into / "root", into / "etcd.db")
