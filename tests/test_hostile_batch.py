"""The learner-against-learner corpus, every road in one real ``gpulab grade-batch --jobs 2`` beside an honest
bundle, whose verdicts must equal its verdicts graded alone.

The roads (the starving neighbour has its own five batches, ``test_fair_time.py``):

- a script that asks the API server to dial for it: every ``proxy``, ``portforward``, ``exec``, ``attach`` and
  ``log`` subresource, through its view, and then a scan of loopback for any door to the host; a canary HTTP
  server on the host's loopback counts what reaches it;
- a snapshot with a node whose kubelet is the host's loopback, where that canary listens: refused before any
  grading;
- a bundle named to take the honest learner's row (``.b-honest``) and one named to break the cohort report
  (``cohort.csv``): refused, no row, the report still written;
- a manifest with a key added to grind the seed: refused.
"""

from __future__ import annotations

import http.server
import io
import json
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from cohort_cases import verdicts
from grading import solve

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import MANIFEST, manifest_checksum, write_bundle
from pytest_gpulab.cohort.regrade import grade_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.sandbox import confine as sandbox
from pytest_gpulab.selftest.variants import copy_root

LAB = "gpurt"
CROSSCHECK = "bin/rc-crosscheck.sh"
pytestmark = pytest.mark.skipif(not sandbox.probe().namespaces, reason="no sandbox on this machine")

# Through the view (its KUBECONFIG), every subresource that has the API server dial an address; then every
# loopback port of its own namespace. Prints what answered.
DIALLER = """#!/usr/bin/env python3
import json, os, re, socket, urllib.request
server = re.search(r"server: *(\\S+)", open(os.environ["KUBECONFIG"]).read()).group(1)
def get(path):
    try:
        with urllib.request.urlopen(server + path, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except OSError:
        return None, b""
paths = []
for kind in ("pods", "services", "nodes"):
    status, listed = get(f"/api/v1/{kind}")
    for item in (json.loads(listed or b"{}").get("items") or []):
        meta = item["metadata"]
        base = f"/api/v1/namespaces/{meta['namespace']}/{kind}/{meta['name']}" if meta.get("namespace") else f"/api/v1/{kind}/{meta['name']}"
        paths += [f"{base}/proxy/", f"{base}/log", f"{base}/exec?command=id", f"{base}/attach", f"{base}/portforward"]
answered = [path for path in paths if get(path)[0] != 403]
open_ports = []
for port in range(1, 65536):
    with socket.socket() as s:
        s.settimeout(0.05)
        if s.connect_ex(("127.0.0.1", port)) == 0 and s.getsockname() != s.getpeername():
            open_ports.append(port)
print(json.dumps({"tried": len(paths), "answered": answered, "open": open_ports}))
"""


class Canary(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Canary.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"canary")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def canary() -> Iterator[int]:
    """An HTTP server on the host's loopback that no learner's request may reach."""
    Canary.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canary)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def ground(bundle: Path, out: Path) -> None:
    """The bundle with a key added to its manifest and the checksum made again: what a seed grinder writes."""
    with tarfile.open(bundle, "r:gz") as source, tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == MANIFEST and data is not None:
                manifest = json.loads(data)
                manifest["grind"] = "00017"
                manifest["checksum"] = manifest_checksum(manifest)
                data = json.dumps(manifest).encode()
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)


def on_loopback(port: int) -> str:
    """A node's status whose kubelet is the host's loopback, on the canary's port: what a node proxy dials."""
    return json.dumps({
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}
    })  # fmt: skip


def corpus(base: Path, port: int) -> Path:
    folder = base / "bundles"
    folder.mkdir()
    honest = base / "honest"
    honest.mkdir()
    lab = discover().get(LAB)
    with KwokCluster.for_lab(LAB, name="tests-hostile-batch") as cluster:
        solve(LAB, cluster, honest)
        dialler = copy_root(honest, base / "dialler")
        (dialler / CROSSCHECK).write_text(DIALLER)
        write_bundle(lab, honest, cluster, folder / "b-honest.gpulab.tar.gz", learner="b-honest")
        write_bundle(lab, dialler, cluster, folder / "a-dialler.gpulab.tar.gz", learner="a-dialler")
        node = cluster.kubectl("get", "nodes", "-o", "name").stdout.split()[0]
        cluster.kubectl("patch", node, "--subresource=status", "--type=merge", "-p", on_loopback(port))
        write_bundle(lab, honest, cluster, folder / "a-loopback.gpulab.tar.gz", learner="a-loopback")
    shutil.copyfile(folder / "b-honest.gpulab.tar.gz", base / "alone.gpulab.tar.gz")
    for name in (".b-honest.gpulab.tar.gz", "cohort.csv.gpulab.tar.gz"):
        shutil.copyfile(folder / "a-dialler.gpulab.tar.gz", folder / name)
    ground(folder / "a-dialler.gpulab.tar.gz", folder / "a-grinder.gpulab.tar.gz")
    return folder


def test_every_road_graded_beside_an_honest_bundle_moves_nothing_of_it(tmp_path, canary):
    folder = corpus(tmp_path, canary)
    alone = grade_bundle(tmp_path / "alone.gpulab.tar.gz", tmp_path / "alone")
    assert alone.status == "graded" and alone.earned == alone.possible, alone.reason
    results = tmp_path / "results"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("gpulab")), "grade-batch", str(folder), "--jobs", "2", "--out", str(results)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((results / "b-honest" / "report.json").read_text())
    assert verdicts(report) == verdicts(json.loads((tmp_path / "alone" / "report.json").read_text()))
    assert report["earned"] == alone.earned
    outcome = {p.parent.name: json.loads(p.read_text()) for p in results.glob("*/outcome.json")}
    assert sorted(outcome) == ["a-dialler", "a-grinder", "a-loopback", "b-honest"]
    assert outcome["a-loopback"]["status"] == "refused"
    assert "grading machine's own" in outcome["a-loopback"]["reason"], outcome["a-loopback"]
    assert outcome["a-grinder"]["status"] == "refused"
    assert "'grind'" in outcome["a-grinder"]["reason"]
    refused = {
        row["bundle"]: row["reason"] for row in json.loads((results / "cohort.refused.json").read_text())["refused"]
    }
    assert set(refused) == {".b-honest.gpulab.tar.gz", "cohort.csv.gpulab.tar.gz"}, refused
    assert (results / "cohort.csv").is_file()
    assert (results / "cohort.json").is_file()
    dialled = [
        json.loads(line)
        for step in json.loads((results / "a-dialler" / "report.json").read_text())["steps"]
        for check in step["checks"]
        for line in str((check.get("detail") or {}).get("stdout", "")).splitlines()
        if line.startswith('{"tried"')
    ]
    assert all(run["answered"] == [] for run in dialled), dialled
    assert any(run["tried"] for run in dialled), dialled  # not every run has an API server that answers
    assert all(run["open"] in ([8001], []) for run in dialled), dialled
    assert Canary.hits == []
