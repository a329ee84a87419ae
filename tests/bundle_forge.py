"""Submission bundles made by hand, byte by byte, for ``test_bundle_format``; and the check of a refusal.

A member is its tar header and padded data as ``tarfile`` writes them in pax format, so a test can put
anything anywhere: a header of its own, a member twice, a pax record no writer would make.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulab.cohort import bundle
from pytest_gpulab.cohort.bundle import FORMAT, MANIFEST, ROOT, SNAPSHOT, Limits
from pytest_gpulab.cohort.unbundle import BundleRefused, open_bundle
from pytest_gpulab.labs import discover

SNAP = b"any bytes stand for the etcd snapshot"
FILES = {"a.txt": b"hello\n", "bin/run.sh": b"#!/bin/sh\n", "d/e/f/deep.bin": bytes(range(256)) * 9, "empty": b""}
EXECUTABLE = {"bin/run.sh"}
SMALL = Limits(file_bytes=4096, root_bytes=8192, files=8, snapshot_bytes=4096, manifest_bytes=8192, bundle_bytes=65536)
Files = dict[str, bytes]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest(contents: Files = FILES, executable: Collection[str] = EXECUTABLE, **changes: Any) -> dict[str, Any]:
    """As ``bundle._manifest`` makes it, ``changes`` made before the checksum is taken."""
    listed = [
        {"path": p, "bytes": len(d), "sha256": sha(d), "executable": p in executable} for p, d in contents.items()
    ]
    shot = {"path": SNAPSHOT, "format": "etcd", "bytes": len(SNAP), "sha256": sha(SNAP)}
    body = {"format": FORMAT, "lab": "gpuop", "rubric_version": "1", "learner": None, "tools": {}}
    body |= {"created_at": "2026-01-01T00:00:00Z", "snapshot": shot, "files": listed, "refused": [], **changes}
    return {**body, "checksum": bundle.manifest_checksum(body)}


def member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **attrs: Any) -> bytes:
    """One member, header and padded data; a name with a NUL in it is kept whole in a pax path."""
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode = kind, len(data), 0o755 if name[len(ROOT) :] in EXECUTABLE else 0o644
    info.pax_headers = {"path": name} if "\x00" in name else {}
    for key, value in attrs.items():
        setattr(info, key, value)
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape") + data + bytes(-len(data) % 512)


def pax(records: dict[bytes, bytes]) -> bytes:
    """A pax extended header member holding these records, byte for byte."""
    body = b""
    for key, value in records.items():
        record = b" " + key + b"=" + value + b"\n"
        size = len(record) + 1
        while len(str(size)) + len(record) != size:
            size += 1
        body += str(size).encode() + record
    return member("pax", body, tarfile.XHDTYPE)


def patched(chunk: bytes, at: int, value: bytes) -> bytes:
    """The member with bytes of its header replaced, and the header's checksum made right again."""
    header = bytearray(chunk[:512])
    header[at : at + len(value)] = value
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header) + chunk[512:]


def honest(files: Files = FILES, meta: dict[str, Any] | None = None) -> list[bytes]:
    """The members ``write_bundle`` would write for these files, in its order; ``meta`` for their manifest."""
    head = json.dumps(meta or manifest(files), indent=2).encode()
    return [member(MANIFEST, head), member(SNAPSHOT, SNAP), *(member(ROOT + p, d) for p, d in files.items())]


def swapped(index: int, chunk: bytes) -> list[bytes]:
    """The honest members with the one at ``index`` (0 manifest, 1 snapshot, 2 ``root/a.txt``) replaced."""
    chunks = honest()
    return [*chunks[:index], chunk, *chunks[index + 1 :]]


def gz(chunks: list[bytes], end: bytes = bytes(1024)) -> bytes:
    """Compressed, the archive padded to whole 10 KiB records as tarfile's writer pads it."""
    data = b"".join(chunks) + end
    return gzip.compress(data + bytes(-len(data) % tarfile.RECORDSIZE), 9, mtime=0)


def damaged(stop: int, insert: bytes = b"", resume: int | None = None) -> Callable[[], bytes]:
    """The honest bundle's file cut at ``stop``, then ``insert``, then what followed from ``resume`` on."""
    return lambda: (lambda data: data[:stop] + insert + (b"" if resume is None else data[resume:]))(gz(honest()))


def write(tmp_path: Path, data: bytes) -> Path:
    (tmp_path / "outer").mkdir(exist_ok=True)  # the grader's folder, to hold only ``into``
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(data)
    return path


def refuse(tmp_path: Path, data: bytes, match: str | None = None, limits: Limits = SMALL) -> None:
    """open_bundle refuses with a sentence, and nothing is left outside ``into``: no ``escaped*`` anywhere."""
    path = write(tmp_path, data)
    with pytest.raises(BundleRefused, match=match) as refusal:
        open_bundle(path, tmp_path / "outer" / "into", limits=limits)
    assert len(str(refusal.value)) > 10
    assert {p.name for p in tmp_path.iterdir()} == {"outer", path.name}
    assert {p.name for p in (tmp_path / "outer").iterdir()} <= {"into"}
    assert not list(tmp_path.rglob("escaped*"))
    assert not (tmp_path.parent / "escaped").exists()


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Each file below ``root``: its bytes and permission bits."""
    files = (p for p in root.rglob("*") if not p.is_dir())
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777) for p in files}


def written(root: Path, out: Path, limits: Limits = SMALL) -> Path:
    """What ``write_bundle`` writes for ``root`` (``root_files``, then ``pack``), with SNAP as its snapshot."""
    snapshot = out.with_name("snapshot.db")
    snapshot.write_bytes(SNAP)
    bundle.pack(discover().get("gpuop"), bundle.root_files(root, limits), snapshot, out, limits=limits)
    return out


def meta(**changes: Any) -> list[bytes]:
    """The honest members, under a manifest of these changes (its checksum right)."""
    return honest(meta=manifest(**changes))


def link_then_through() -> list[bytes]:
    """A link to the folder above ``into``, then a listed file below that link."""
    return [*honest()[:3], member("root/d", kind=tarfile.SYMTYPE, linkname="../../.."), *honest()[4:]]


def giant_long_name(size: int) -> list[bytes]:
    return [*honest()[:2], member("././@LongLink", bytes(size), tarfile.GNUTYPE_LONGNAME), *honest()[2:]]


def with_pax(records: dict[bytes, bytes], after: bytes = FILES["a.txt"]) -> Callable[[], bytes]:
    """The honest bundle with these pax records on ``root/a.txt``, whose data is then ``after``."""
    return lambda: gz(swapped(2, pax(records) + member("root/a.txt", after)))


def sparse_cut_short() -> bytes:
    """An old GNU sparse header promising an extension block, and then the end of the stream."""
    return gzip.compress(patched(member("root/a.txt", kind=tarfile.GNUTYPE_SPARSE), 482, b"\x01"))


def lay_out(root: Path, files: Files) -> Path:
    """A real folder of these files, made below ``root``."""
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    return root


def deep_folders(root: Path, depth: int, name: str) -> None:
    """Folders ``name`` in one another below ``root``, each made relative to the one before: past PATH_MAX if need be."""
    descriptor = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=descriptor)
        inner = os.open(name, os.O_RDONLY, dir_fd=descriptor)
        os.close(descriptor)
        descriptor = inner
    os.close(descriptor)
