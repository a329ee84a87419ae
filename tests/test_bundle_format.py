"""Bundles forged by hand (``bundle_forge``) against ``open_bundle``'s contract, and ``root_files`` on a real tree.

A hostile bundle is a ``BundleRefused`` with a sentence, bounded in time and memory, and leaves nothing
outside ``into``; an honest one opens with every byte and exec bit. Several cases here are bugs found
this way and fixed.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bundle_forge as forge
import pytest
from bundle_forge import FILES, SMALL, Files, gz, honest, manifest, member, refuse, swapped, tree, write

from pytest_gpulab.cohort import bundle, regrade
from pytest_gpulab.cohort.bundle import LIMITS, MANIFEST, SNAPSHOT, Limits
from pytest_gpulab.cohort.unbundle import BundleRefused, open_bundle
from pytest_gpulab.labs.discovery import discover

BOMB = 8 << 20  # unpacked bytes of each bomb: some 150 times all that SMALL allows
LINK = "a symbolic link (links are not followed)"


def test_an_honest_bundle_opens_with_every_byte_and_exec_bit(tmp_path: Path) -> None:
    opened = open_bundle(write(tmp_path, gz(honest())), tmp_path / "into", limits=SMALL)
    assert opened.lab == "gpuop"
    assert opened.manifest == manifest()
    assert opened.snapshot == tmp_path / "into" / "etcd.db"
    assert opened.snapshot.read_bytes() == forge.SNAP
    assert tree(opened.root) == {p: (d, 0o755 if p in forge.EXECUTABLE else 0o644) for p, d in FILES.items()}
    assert {p.name for p in (tmp_path / "into").iterdir()} == {"root", "etcd.db"}


def test_a_real_lab_root_round_trips_through_writer_and_reader(tmp_path: Path) -> None:
    files = {"README.md": b"# lab\n", "k8s/pod.yaml": b"kind: Pod\n", "naïve ünï.txt": b"\xff\x00", "empty": b""}
    files |= {"/".join(["level"] * 20) + "/deep.toml": b"x = 1\n", os.fsdecode(b"raw-\xff-name"): b"bytes"}
    files |= {"scripts/check.sh": b"#!/bin/sh\n"}
    forge.lay_out(tmp_path / "lab", files)
    (tmp_path / "lab" / "scripts/check.sh").chmod(0o750)
    (tmp_path / "lab" / "link").symlink_to("README.md")
    opened = open_bundle(forge.written(tmp_path / "lab", tmp_path / "b.tar.gz"), tmp_path / "into", limits=SMALL)
    assert tree(opened.root) == {p: (d, 0o755 if p.endswith(".sh") else 0o644) for p, d in files.items()}
    assert opened.manifest["refused"] == [{"path": "link", "reason": LINK}]


def test_the_manifest_records_where_the_lab_root_stood(tmp_path: Path) -> None:
    """A path the learner wrote under their root (an absolute imports glob) is read from the unpacked copy: the
    grader learns where the root stood from the manifest, and passes it on as --lab-root-recorded."""
    root = forge.lay_out(tmp_path / "home" / "ana" / "gpurt", {"etc/config.toml": b"version = 2\n"})
    snapshot = tmp_path / "snapshot.db"
    snapshot.write_bytes(forge.SNAP)
    out = tmp_path / "b.tar.gz"
    bundle.pack(discover().get("gpuop"), bundle.root_files(root, SMALL), snapshot, out, limits=SMALL, root=str(root))
    opened = open_bundle(out, tmp_path / "into", limits=SMALL)
    assert opened.recorded_root == str(root)
    assert opened.root != root
    args = regrade._pytest_args(opened, tmp_path / "kubeconfig", tmp_path, 1, (), ())
    assert f"--lab-root-recorded={root}" in args


@pytest.mark.parametrize("written", ["relative/root", 7, "/with\0nul"])
def test_a_recorded_root_that_is_not_an_absolute_path_is_refused(tmp_path: Path, written: Any) -> None:
    refuse(tmp_path, gz(forge.meta(root=written)), match="lab root")


def test_a_lab_root_of_many_files_past_the_limit_still_opens(tmp_path: Path) -> None:
    forge.lay_out(tmp_path / "lab", {f"site-packages-{number:04}.py": b"" for number in range(400)})
    limits = Limits(files=4, manifest_bytes=16 << 10)
    open_bundle(forge.written(tmp_path / "lab", tmp_path / "b.tar.gz", limits), tmp_path / "into", limits=limits)


Case = tuple[Callable[[], list[bytes]], str]
HOSTILE: dict[str, Case] = {
    "manifest-missing": (lambda: honest()[1:], "start with its manifest"),
    "manifest-not-first": (lambda: [honest()[1], honest()[0], *honest()[2:]], "start with its manifest"),
    "manifest-too-large": (lambda: [member(MANIFEST, b" " * (SMALL.manifest_bytes + 1))], "start with its manifest"),
    "manifest-not-json": (lambda: [member(MANIFEST, b'{"format": 1,')], "not JSON"),
    "manifest-not-utf8": (lambda: [member(MANIFEST, b'{"lab": "\xff\xfe"}')], "not JSON"),
    "manifest-a-list": (lambda: [member(MANIFEST, b"[1]")], "not of bundle format"),
    "manifest-format-2": (lambda: forge.meta(format=2), "not of bundle format"),
    "manifest-edited-after": (lambda: honest(meta={**manifest(), "lab": "gpurt"}), "checksum"),
    "manifest-checksum-missing": (lambda: honest(meta={**manifest(), "checksum": None}), "checksum"),
    "manifest-files-not-a-list": (lambda: forge.meta(files="all"), "lacks its lab, files or snapshot"),
    "manifest-lab-missing": (lambda: forge.meta(lab=None), "lacks its lab, files or snapshot"),
    "manifest-entry-unsized": (lambda: forge.meta(files=[{"path": "a.txt"}]), "without a path"),
    "manifest-snapshot-unsized": (lambda: forge.meta(snapshot={}), "snapshot is missing"),
    "manifest-tools-a-list": (lambda: forge.meta(tools=["kubernetes"]), "tools' versions wrongly"),
    "manifest-tools-a-string": (lambda: forge.meta(tools="kubernetes 1.36"), "tools' versions wrongly"),
    "manifest-tool-version-not-text": (lambda: forge.meta(tools={"kubernetes": [1, 36]}), "tools' versions wrongly"),
    "manifest-lists-a-file-twice": (lambda: forge.meta(files=manifest()["files"] * 2), "twice"),
    "manifest-negative-size": (lambda: forge.meta(files=[{"path": "a.txt", "bytes": -6}]), "not the size"),
    "more-files-than-the-limit": (lambda: honest({f"f{n}": b"" for n in range(SMALL.files + 1)}), "passes 8 files"),
    "root-over-its-size": (lambda: honest({n: bytes(3000) for n in "abc"}), "passes 8 files or its size limit"),
    "snapshot-over-its-size": (
        lambda: forge.meta(snapshot={"bytes": SMALL.snapshot_bytes + 1}),
        "snapshot is larger than",
    ),
    "member-not-listed": (lambda: [*honest(), member("root/extra", b"x")], "does not list"),
    "member-twice": (lambda: [*honest(), honest()[2]], "does not list"),
    "manifest-twice": (lambda: [*honest(), honest()[0]], "does not list"),
    "listed-file-missing": (lambda: honest()[:-1], "lacks root/empty"),
    "snapshot-missing": (lambda: [honest()[0], *honest()[2:]], "lacks cluster/etcd.db"),
    "file-of-another-size": (lambda: swapped(2, member("root/a.txt", b"hello!\n")), "not the size"),
    "file-of-other-bytes": (lambda: swapped(2, member("root/a.txt", b"HELLO\n")), "sha256"),
    "snapshot-of-other-bytes": (lambda: swapped(1, member(SNAPSHOT, forge.SNAP.upper())), "sha256"),
    "garbage-header-midway": (lambda: [*honest()[:3], b"\x01" * 512], "header is garbled"),
    "link-to-a-dir-then-a-file-in-it": (forge.link_then_through, "not a regular file"),
}


@pytest.mark.parametrize("case", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_bundle_is_refused(tmp_path: Path, case: Case) -> None:
    build, match = case
    refuse(tmp_path, gz(build()), match)


KINDS: dict[str, dict[str, Any]] = {
    "symlink": {"kind": tarfile.SYMTYPE, "linkname": "../../../escaped"},
    "symlink-absolute": {"kind": tarfile.SYMTYPE, "linkname": "/etc/passwd"},
    "hardlink": {"kind": tarfile.LNKTYPE, "linkname": "root/bin/run.sh"},
    "directory": {"kind": tarfile.DIRTYPE},
    "fifo": {"kind": tarfile.FIFOTYPE},
    "char-device": {"kind": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3},
    "block-device": {"kind": tarfile.BLKTYPE, "devmajor": 7, "devminor": 0},
    "unknown-type": {"kind": b"Z"},
}


@pytest.mark.parametrize("index", [0, 2], ids=["as-the-manifest", "as-a-listed-file"])
@pytest.mark.parametrize("attrs", KINDS.values(), ids=KINDS.keys())
def test_a_member_that_is_not_a_regular_file_is_refused(tmp_path: Path, attrs: dict[str, Any], index: int) -> None:
    refuse(tmp_path, gz(swapped(index, member({0: MANIFEST, 2: "root/a.txt"}[index], **attrs))), "not a regular file")


OUTSIDE = ["..", "../escaped", "../../escaped", "../../../escaped", "../../../../escaped", "d/../../../escaped"]
OUTSIDE += ["", ".", "a\x00escaped", "/" + "x" * 256, "escaped/" + "x" * 256, "{tmp}/escaped-absolute"]


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_listed_path_outside_the_root_is_refused(tmp_path: Path, name: str) -> None:
    refuse(tmp_path, gz(honest({name.replace("{tmp}", str(tmp_path)): b"x"})), "outside its lab root")


UNLISTED = ["../escaped", "root/../escaped", "root/../../../escaped", "root//a.txt", "root/./a.txt", "./root/a.txt"]
UNLISTED += ["root/a.txt/", "/root/a.txt", "root/a.txt\x00escaped", "{tmp}/escaped-absolute"]


@pytest.mark.parametrize("name", UNLISTED)
def test_a_member_named_unlike_its_listing_is_refused(tmp_path: Path, name: str) -> None:
    refuse(tmp_path, gz(swapped(2, member(name.replace("{tmp}", str(tmp_path)), FILES["a.txt"]))), "does not list")


@pytest.mark.parametrize("files", [{"a": b"1", "a/b": b"2"}, {"a/b": b"2", "a": b"1"}], ids=["file-first", "dir-first"])
def test_a_file_and_a_directory_of_one_name_are_refused(tmp_path: Path, files: Files) -> None:
    refuse(tmp_path, gz(honest(files)))


ACCEPTED: dict[str, Callable[[], bytes]] = {
    "listed-a//b": lambda: gz(honest({"a//b": b"x"})),
    "listed-./a": lambda: gz(honest({"./a": b"x"})),
    "listed-a/./b": lambda: gz(honest({"a/./b": b"x"})),
    "listed-a/": lambda: gz(honest({"a/": b"x"})),
    "file-over-file_bytes": lambda: gz(honest({"big": bytes(SMALL.file_bytes + 1)})),
    "gzip-trailer-cut-off": forge.damaged(-8),
    "gzip-crc-wrong": forge.damaged(-8, bytes(8)),
}


@pytest.mark.parametrize("build", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_a_bundle_unlike_the_writer_s_is_refused(tmp_path: Path, build: Callable[[], bytes]) -> None:
    refuse(tmp_path, build())


def test_members_past_the_end_of_the_archive_are_never_written(tmp_path: Path) -> None:
    hidden = member("root/escaped", b"x") + member("../escaped", b"x") + bytes(1024)
    opened = open_bundle(write(tmp_path, gz(honest(), bytes(1024) + hidden)), tmp_path / "into", limits=SMALL)
    assert set(tree(opened.root)) == set(FILES)
    assert not list(tmp_path.rglob("escaped*"))


STREAMS: dict[str, Callable[[], bytes]] = {
    "not-gzip": lambda: b"".join(honest()) + bytes(1024),
    "zip": lambda: b"PK\x03\x04" + bytes(200),
    "zero-bytes": lambda: b"",
    "gzip-of-garbage": lambda: gzip.compress(b"garbage " * 300),
    "gzip-of-nothing": lambda: gzip.compress(b""),
    "gzip-corrupt-midway": forge.damaged(100, b"\xff" * 8, 108),
    "truncated-mid-tail": forge.damaged(-30),
}
STREAMS |= {f"truncated-to-{n}": forge.damaged(n) for n in (1, 2, 10, 11, 40, 300, 900)}


@pytest.mark.parametrize("build", STREAMS.values(), ids=STREAMS.keys())
def test_a_bundle_that_is_not_a_whole_tar_gz_is_refused(tmp_path: Path, build: Callable[[], bytes]) -> None:
    refuse(tmp_path, build(), "cannot be read as a gzip-compressed tar file")


def test_an_archive_without_members_is_refused_as_empty(tmp_path: Path) -> None:
    refuse(tmp_path, gz([], bytes(10240)), "the bundle is empty")


def test_a_bundle_file_over_bundle_bytes_is_refused_unread(tmp_path: Path) -> None:
    refuse(tmp_path, b"\x1f\x8b" + bytes(SMALL.bundle_bytes), "larger than")


def test_a_bundle_path_that_is_no_file_is_refused(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.tar.gz"):
        with pytest.raises(BundleRefused, match="is not a file"):
            open_bundle(path, tmp_path / "into")


BOMBS: dict[str, Case] = {
    "listed-file": (lambda: honest({"big": bytes(BOMB)}), "unpacks to more"),
    "unlisted-file": (lambda: [*honest(), member("root/big", bytes(BOMB))], "unpacks to more"),
    "as-the-manifest": (lambda: [member(MANIFEST, bytes(BOMB))], "unpacks to more"),
    "giant-pax-header": (lambda: [*honest()[:2], forge.pax({b"path": b"a" * BOMB}), *honest()[2:]], "tar header of"),
    "giant-gnu-long-name": (lambda: forge.giant_long_name(BOMB), "tar header of"),
}


@pytest.mark.parametrize("case", BOMBS.values(), ids=BOMBS.keys())
def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path, case: Case) -> None:
    build, match = case
    data = gz(build())
    assert len(data) < SMALL.bundle_bytes
    tracemalloc.start()
    try:
        refuse(tmp_path, data, match)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20


CRASHES: dict[str, Callable[[], bytes]] = {
    "pax-gnu-sparse-map": forge.with_pax({b"GNU.sparse.map": b"x"}),
    "pax-gnu-sparse-size": forge.with_pax({b"GNU.sparse.size": b"x"}),
    "pax-gnu-sparse-realsize": forge.with_pax({b"GNU.sparse.realsize": b"x"}),
    "pax-gnu-sparse-1.0-map": forge.with_pax({b"GNU.sparse.major": b"1", b"GNU.sparse.minor": b"0"}, b"zz\n"),
    "pax-hdrcharset-not-utf8": forge.with_pax({b"hdrcharset": b"\xff"}),
    "pax-length-of-5000-digits": lambda: gz(swapped(2, member("pax", b"9" * 5000 + b" path=x\n", tarfile.XHDTYPE))),
    "gnu-sparse-cut-short": forge.sparse_cut_short,
}


@pytest.mark.parametrize("build", CRASHES.values(), ids=CRASHES.keys())
def test_a_malformed_tar_header_is_refused(tmp_path: Path, build: Callable[[], bytes]) -> None:
    refuse(tmp_path, build())


def test_a_deeply_nested_manifest_is_refused(tmp_path: Path) -> None:
    refuse(tmp_path, gz([member(MANIFEST, b"[" * 100_000)]), "not JSON", LIMITS)


def test_a_pax_header_of_digits_does_not_hang_the_grader(tmp_path: Path) -> None:
    """A long pax header takes some Pythons hours to parse: it is refused for its size, before tarfile reads it.
    Opened in a process of its own, so that a grader that parsed it is stopped: a bound on a hang, not a speed."""
    path = write(tmp_path, gz(swapped(2, member("pax", b"7" * (2 << 20), tarfile.XHDTYPE) + honest()[2])))
    code = "import sys, pathlib, pytest_gpulab.cohort.unbundle as u\ntry: u.open_bundle(*map(pathlib.Path, sys.argv[1:]))\n"
    code += "except u.BundleRefused as refused: print(refused)"
    command = [sys.executable, "-c", code, str(path), str(tmp_path / "into")]
    try:
        done = subprocess.run(command, timeout=120, check=True, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"open_bundle was still busy after 120 s on a bundle of {path.stat().st_size} bytes")
    assert "a tar header of 2097152 bytes; a bundle's are under 64 KiB" in done.stdout, done


def test_root_files_takes_regular_files_and_follows_no_link(tmp_path: Path) -> None:
    root, outside = tmp_path / "lab", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"not the learner's")
    (root / "sub" / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "sub" / "run.sh").chmod(0o700)
    (root / "to-file").symlink_to(outside / "secret")
    (root / "to-dir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "pipe")  # opened, it would block the writer for good
    found = bundle.root_files(root, SMALL)
    assert found.files == [("sub/run.sh", b"#!/bin/sh\n", True)]
    assert found.total == 10
    refused = [("pipe", "not a regular file"), ("to-dir", LINK), ("to-file", LINK)]
    assert found.refused == [{"path": path, "reason": reason} for path, reason in refused]


LIMITED = {
    "file-bytes": (Limits(file_bytes=4), {"a": b"12345", "b": b"1234"}, "a", "larger than 0 MiB"),
    "files": (Limits(files=2), {"a": b"", "b": b"", "c": b""}, "c", "more than 2 files"),
    "root-bytes": (Limits(root_bytes=6), {"a": b"1234", "b": b"1234", "c": b"12"}, "b", "the root's files pass 0 MiB"),
}


@pytest.mark.parametrize(("limits", "files", "left_out", "reason"), LIMITED.values(), ids=LIMITED.keys())
def test_root_files_leaves_out_what_passes_a_limit(
    tmp_path: Path, limits: Limits, files: Files, left_out: str, reason: str
) -> None:
    found = bundle.root_files(forge.lay_out(tmp_path, files), limits)
    assert found.files == [(name, data, False) for name, data in files.items() if name != left_out]
    assert found.refused == [{"path": left_out, "reason": reason}]


def test_root_files_leaves_out_what_it_cannot_read(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a file or folder of mode 000")
    (tmp_path / "secret").write_bytes(b"x")
    (tmp_path / "closed").mkdir()
    for path in (tmp_path / "secret", tmp_path / "closed"):
        path.chmod(0)
    found = bundle.root_files(tmp_path)
    assert found.files == []
    assert [r["path"] for r in found.refused] == ["closed/", "secret"]
    assert {r["reason"] for r in found.refused} == {"cannot be read: Permission denied"}


def test_root_files_leaves_out_a_path_it_cannot_stat(tmp_path: Path) -> None:
    forge.deep_folders(tmp_path, 17, "d" * 250)  # some 4,300 characters
    found = bundle.root_files(tmp_path)
    assert found.files == []
    assert "cannot be read" in found.refused[0]["reason"]


def test_an_empty_folder_and_a_folder_named_like_a_file_come_back(tmp_path: Path) -> None:
    """gpuop's step 7 grades out/slots.txt being a folder: the bundle keeps the root's folders too."""
    lab = forge.lay_out(tmp_path / "lab", {"out/rollout.txt": b"DESIRED=3\n"})
    (lab / "out" / "slots.txt").mkdir()
    (lab / "empty").mkdir()
    opened = open_bundle(forge.written(lab, tmp_path / "b.tar.gz"), tmp_path / "into", limits=SMALL)
    assert (opened.root / "out" / "slots.txt").is_dir()
    assert (opened.root / "empty").is_dir()
    assert opened.manifest["dirs"] == ["empty", "out", "out/slots.txt"]


FOLDERS: dict[str, Any] = {
    "traversing": ["../escaped"],
    "absolute": ["/escaped"],
    "not-a-list": "out",
    "not-names": [1],
    "a-listed-file": ["a.txt"],
}


@pytest.mark.parametrize("dirs", FOLDERS.values(), ids=FOLDERS.keys())
def test_a_manifest_s_hostile_folders_are_refused(tmp_path: Path, dirs: Any) -> None:
    refuse(tmp_path, gz(forge.meta(dirs=dirs)))


def test_a_manifest_key_no_writer_writes_is_refused(tmp_path: Path) -> None:
    """A key added to grind the manifest's checksum (once the seed came from it) is refused, whatever it holds."""
    refuse(tmp_path, gz(forge.meta(nonce="0000000000001337")), match="no bundle writer writes: 'nonce'")


def test_the_seed_is_keyed_with_the_instructor_s_secret_made_once_and_private(tmp_path: Path) -> None:
    secret = regrade.seed_secret(tmp_path / "results")
    path = tmp_path / "results" / regrade.SECRET_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(secret) == 64
    assert regrade.seed_secret(tmp_path / "results") == secret  # made once: a re-grade keeps its seeds
    assert [p.name for p in (tmp_path / "results").iterdir()] == [regrade.SECRET_FILE]
    digest = "ab" * 32
    assert regrade.keyed_seed(secret, digest) == regrade.keyed_seed(secret, digest)
    assert regrade.keyed_seed(secret, digest) != regrade.keyed_seed(b"another instructor", digest)
    given = tmp_path / "given"
    given.write_text("the course's own secret\n")
    assert regrade.seed_secret(tmp_path / "elsewhere", given) == b"the course's own secret"
