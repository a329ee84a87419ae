"""Headless Chromium for the cohort page's tests, and what they read from it: the DOM it built
(parsed into ``Node`` trees), the URLs the page asked the network for, and its screenshot (a PNG,
decoded here with no imaging library)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (scripts/setup installs Debian's as root): the cohort page's browser test is skipped",
)


# The DOM -------------------------------------------------------------------------------------------


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.walk()

    def select(self, tag: str, cls: str | None = None, ident: str | None = None) -> list[Node]:
        return [
            node for node in self.walk() if node.tag == tag
            and (cls is None or cls in node.attrs.get("class", "").split())
            and (ident is None or node.attrs.get("id") == ident)
        ]  # fmt: skip

    def one(self, tag: str, ident: str) -> Node:
        [node] = self.select(tag, ident=ident)
        return node

    def cells(self) -> list[str]:
        return [cell.text() for cell in self.select("td")]


class DomBuilder(HTMLParser):
    """The tree of a serialized DOM (Chromium's --dump-dom writes every end tag but the void elements')."""

    VOID = frozenset(
        {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.open[-1].children.append(node)
        if tag not in self.VOID:
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        depth = max((i for i, node in enumerate(self.open) if node.tag == tag), default=0)
        if depth:
            del self.open[depth:]

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


def parse_dom(html: str) -> Node:
    builder = DomBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with a fresh profile, its traffic sent to a proxy that is not there."""
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
               "--proxy-server=127.0.0.1:9", "--no-first-run", "--disable-background-networking", *args]  # fmt: skip
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def page_requests(net_log: Path) -> list[str]:
    """The URLs the page asked the network for (Chromium's own background requests are not the page's)."""
    log = json.loads(net_log.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    events = [event.get("params", {}) for event in log["events"] if event["type"] == start]
    return [p["url"] for p in events if "url" in p and "file://" in p.get("network_isolation_key", "")]


def dump_dom(page: Path, work: Path) -> tuple[str, list[str]]:
    """The DOM Chromium built from ``page`` and the URLs the page requested."""
    net_log = work / f"{page.stem}.netlog.json"
    result = chromium(work / f"{page.stem}-dom-profile", f"--log-net-log={net_log}", "--dump-dom", page.as_uri())
    return result.stdout, page_requests(net_log)


def keep_artifact(screenshot: Path) -> None:
    """Keep the screenshot as cohort.png for a person to look at: in $GPULAB_TEST_ARTIFACTS, or .artifacts/."""
    folder = Path(os.environ.get("GPULAB_TEST_ARTIFACTS") or CHECKOUT / ".artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(screenshot, folder / "cohort.png")


# The screenshot ------------------------------------------------------------------------------------


@dataclass
class Png:
    width: int
    height: int
    pixel: int  # bytes a pixel
    rows: list[bytes]

    def count(self, colour: bytes) -> int:
        """Pixels of exactly this colour (a pattern across two pixels would count too: rare enough)."""
        return sum(row.count(colour) for row in self.rows)

    def colours(self, every: int = 7) -> set[bytes]:
        return {row[x : x + self.pixel] for row in self.rows[::every] for x in range(0, len(row), self.pixel * every)}


def png_chunks(data: bytes) -> dict[bytes, list[bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks: dict[bytes, list[bytes]] = {}
    at = 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        body, (crc,) = data[at + 8 : at + 8 + length], struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks.setdefault(kind, []).append(body)
        at += 12 + length
    assert b"IEND" in chunks
    return chunks


def paeth(left: int, up: int, corner: int) -> int:
    guess = left + up - corner
    near_left, near_up, near_corner = abs(guess - left), abs(guess - up), abs(guess - corner)
    if near_left <= near_up and near_left <= near_corner:
        return left
    return up if near_up <= near_corner else corner


PREDICTORS: list[Callable[[int, int, int], int]] = [  # PNG's filter types 0 to 4, by the left, up and corner bytes
    lambda left, up, corner: 0,
    lambda left, up, corner: left,
    lambda left, up, corner: up,
    lambda left, up, corner: (left + up) // 2,
    paeth,
]


def unfilter(kind: int, line: bytes, above: bytes, pixel: int) -> bytes:
    """One row of a PNG's pixels from its filtered bytes and the row above."""
    if kind == 0 or (kind == 2 and not line.strip(b"\0")):
        return line if kind == 0 else above  # as filtered, or the row above repeated
    row, predict = bytearray(line), PREDICTORS[kind]
    for i in range(len(row)):
        left, corner = (row[i - pixel], above[i - pixel]) if i >= pixel else (0, 0)
        row[i] = (row[i] + predict(left, above[i], corner)) & 255
    return bytes(row)


def decode_png(data: bytes) -> Png:
    chunks = png_chunks(data)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    assert (depth, colour, interlace) in {(8, 2, 0), (8, 6, 0)}, "expected 8-bit RGB(A), not interlaced"
    pixel = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks[b"IDAT"])), width * pixel + 1
    assert len(raw) == height * stride
    rows, above = [], bytes(stride - 1)
    for y in range(height):
        above = unfilter(raw[y * stride], raw[y * stride + 1 : (y + 1) * stride], above, pixel)
        rows.append(above)
    return Png(width, height, pixel, rows)
