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
EXTENDED_HEADER_BYTES = 64 << 10
CHUNK = 64 << 10
# What tarfile and gzip raise for bytes that are not a tar.gz (tarfile lets some header errors through).
UNREADABLE = (tarfile.TarError, EOFError, zlib.error, OSError, ValueError, IndexError, RecursionError)


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 else f"{count >> 10} KiB" if count >= 1 << 10 else f"{count} bytes"


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

    @property
    def recorded_root(self) -> str | None:
        """Where the learner's lab root stood when it was bundled (older bundles do not say)."""
        root = self.manifest.get("root")
        return root if isinstance(root, str) else None


def _safe_relative(name: str) -> PurePosixPath:
    """The name as written: parts split on ``/`` (PurePosixPath would drop empty and ``.`` ones), each plain."""
    parts = name.split("/")
    if any(part in ("", ".", "..") or not NAME_PART.fullmatch(part) for part in parts):
        raise BundleRefused(f"the bundle names a file outside its lab root, or not as a plain path: {name!r}")
    return PurePosixPath(*parts)


MANIFEST_KEYS = {  # what bundle.py writes; anything more is refused (a key added to grind a checksum, say)
    "format", "lab", "rubric_version", "learner", "root", "created_at", "tools", "snapshot", "files", "dirs",
    "refused", "checksum",
}  # fmt: skip


def _check_manifest(manifest: Any) -> dict[str, Any]:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleRefused(f"the bundle's manifest is not of bundle format {FORMAT}")
    if unknown := sorted(set(manifest) - MANIFEST_KEYS):
        raise BundleRefused(f"the bundle's manifest holds a key no bundle writer writes: {unknown[0]!r}")
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise BundleRefused("the bundle's manifest does not match its checksum: the bundle was damaged or edited")
    files, shot = manifest.get("files"), manifest.get("snapshot")
    if not isinstance(manifest.get("lab"), str) or not isinstance(files, list) or not isinstance(shot, dict):
        raise BundleRefused("the bundle's manifest lacks its lab, files or snapshot")
    if not _is_size(shot.get("bytes")):
        raise BundleRefused("the bundle's cluster snapshot is missing from its manifest, or its size")
    root = manifest.get("root")
    if root is not None and not (isinstance(root, str) and root.startswith("/") and "\0" not in root):
        raise BundleRefused("the bundle's manifest gives the lab root's path wrongly (not an absolute path)")
    tools = manifest.get("tools")
    if tools is not None and not (isinstance(tools, dict) and all(isinstance(v, str) for v in tools.values())):
        raise BundleRefused("the bundle's manifest gives its tools' versions wrongly (not names with version strings)")
    for entry in files:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and _is_size(entry.get("bytes"))):
            raise BundleRefused(
                "the bundle's manifest lists a file without a path, or with a size that is not the size of a file"
            )
        _safe_relative(entry["path"])
    return manifest


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _copy(source: IO[bytes], target: Path, size: int, expected_sha256: Any) -> None:
    digest = hashlib.sha256()
    written = 0
    with open(target, "xb") as out:  # x: never through a file or link already there
        for block in iter(lambda: source.read(CHUNK), b""):
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
        source = archive.extractfile(member)
        assert source is not None  # a regular file's
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _copy(source, target, member.size, entry.get("sha256"))
        except (FileExistsError, NotADirectoryError):
            raise BundleRefused(f"the bundle has {member.name!r} both as a file and as a folder") from None
        target.chmod(0o755 if entry.get("executable") else 0o644)

    def _manifest(self, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        if member.name != MANIFEST or member.size > self.limits.manifest_bytes:
            raise BundleRefused(f"the bundle does not start with its manifest ({MANIFEST})")
        source = archive.extractfile(member)
        assert source is not None
        try:
            self.manifest = _check_manifest(json.loads(source.read()))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise BundleRefused("the bundle's manifest is not JSON, or nested too deep") from None
        self._expect()

    def _expect(self) -> None:
        files, shot, limits = self.manifest["files"], self.manifest["snapshot"], self.limits
        if len(files) > limits.files or sum(entry["bytes"] for entry in files) > limits.root_bytes:
            raise BundleRefused(
                f"the bundle's lab root passes {limits.files} files or its size limit ({_size(limits.root_bytes)})"
            )
        if any(entry["bytes"] > limits.file_bytes for entry in files):
            raise BundleRefused(f"the bundle's lab root has a file larger than {_size(limits.file_bytes)}")
        if shot["bytes"] > limits.snapshot_bytes:
            raise BundleRefused(f"the bundle's cluster snapshot is larger than {_size(limits.snapshot_bytes)}")
        self.expected = {ROOT + entry["path"]: entry for entry in files}
        if len(self.expected) != len(files):
            raise BundleRefused("the bundle's manifest lists a file twice")
        self.expected[SNAPSHOT] = shot
        self._make_dirs(self.manifest.get("dirs", []))

    def _make_dirs(self, dirs: Any) -> None:
        """The root's folders, empty ones too: a folder where a file is expected is what a step grades."""
        if not isinstance(dirs, list) or len(dirs) > self.limits.dirs or not all(isinstance(d, str) for d in dirs):
            raise BundleRefused(f"the bundle's manifest lists its folders wrongly, or more than {self.limits.dirs}")
        for name in dirs:
            target = self._target(ROOT + name)
            try:
                target.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise BundleRefused(f"the bundle has {name!r} both as a file and as a folder") from None

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
            raise BundleRefused(f"the bundle unpacks to more than {_size(self.limit)}")
        return data


def _octal(field: bytes) -> int:
    """A tar header's size field; base-256 sizes (the high bit set) are far past any bundle's limit."""
    if field[:1] and field[0] & 0x80:
        raise BundleRefused("the bundle has a tar member of a size no bundle has")
    text = field.split(b"\0", 1)[0].strip() or b"0"
    if len(text) > 12 or not text.isdigit() or b"8" in text or b"9" in text:
        raise BundleRefused("the bundle cannot be read as a gzip-compressed tar file (a header is garbled)")
    return int(text, 8)


def _check_headers(stream: _Bounded) -> None:
    """Extended headers (pax, GNU long names) are read whole by tarfile, and a long pax header takes
    some Pythons hours to parse: each must be small. Then the stream is read to its end, which checks
    the gzip trailer."""
    while len(header := stream.read(512)) == 512 and header.strip(b"\0"):
        size = _octal(header[124:136])
        if header[156:157] in (b"x", b"g", b"L", b"K") and size > EXTENDED_HEADER_BYTES:
            raise BundleRefused(f"the bundle has a tar header of {size} bytes; a bundle's are under 64 KiB")
        remaining = (size + 511) // 512 * 512
        while remaining and (chunk := stream.read(min(remaining, CHUNK))):
            remaining -= len(chunk)
    while stream.read(CHUNK):
        pass


def _unpack(path: Path, reader: _Reader, unpacked_limit: int) -> None:
    with gzip.open(path, "rb") as compressed:
        _check_headers(_Bounded(compressed, unpacked_limit))
    with gzip.open(path, "rb") as compressed:
        stream = _Bounded(compressed, unpacked_limit)
        with tarfile.open(fileobj=stream, mode="r|") as archive:  # type: ignore[call-overload]
            for member in archive:
                reader.member(archive, member)


def open_bundle(path: Path, into: Path, limits: Limits = LIMITS) -> OpenedBundle:
    """Check and unpack the bundle below ``into`` (an empty directory of the grader's)."""
    if not path.is_file():
        raise BundleRefused(f"{path} is not a file")
    if path.stat().st_size > limits.bundle_bytes:
        raise BundleRefused(f"the bundle is larger than {_size(limits.bundle_bytes)}")
    reader = _Reader(into, limits)
    (into / "root").mkdir(parents=True)
    unpacked_limit = limits.manifest_bytes + limits.snapshot_bytes + limits.root_bytes + (limits.files + 8) * 2048
    try:
        _unpack(path, reader, unpacked_limit)
    except UNREADABLE as error:
        raise BundleRefused(f"the bundle cannot be read as a gzip-compressed tar file ({error})") from None
    if not reader.manifest:
        raise BundleRefused("the bundle is empty")
    if reader.expected:
        raise BundleRefused(f"the bundle lacks {', '.join(sorted(reader.expected))}, which its manifest lists")
    return OpenedBundle(reader.manifest, into / "root", into / "etcd.db")
