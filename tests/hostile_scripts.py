"""Hostile learner scripts that go for the network, and what the tests read to see that they got nowhere."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cluster.kwokconfig import etcd_client_env

PWNED = "gpulab-pwned"

# Scans every loopback port (IPv4 and IPv6), asks each open one for etcd's /version, puts a key into every
# etcd that answers and tries to create a namespace through every API server; prints what it reached as JSON.
ETCD_ATTACK = f"""#!/usr/bin/env python3
import base64, json, socket, urllib.request

def b64(text):
    return base64.b64encode(text.encode()).decode()

def get(port, path):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{{port}}{{path}}", timeout=2).read()
    except Exception:
        return b""

def post(port, path, body):
    request = urllib.request.Request(f"http://127.0.0.1:{{port}}{{path}}", data=json.dumps(body).encode(),
                                     headers={{"Content-Type": "application/json"}})
    try:
        urllib.request.urlopen(request, timeout=2)
        return True
    except Exception:
        return False

found = []
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    for port in range(1, 65536):
        with socket.socket(family) as s:
            s.settimeout(0.2)
            # A connection to itself (its ephemeral source port is the port it asked for) is no door out.
            if s.connect_ex((host, port)) == 0 and s.getsockname()[:2] != s.getpeername()[:2]:
                found.append(port)
etcd = [port for port in found if b"etcdserver" in get(port, "/version")]
written = [port for port in etcd if post(port, "/v3/kv/put", {{"key": b64("{PWNED}"), "value": b64("x")}})]
created = [port for port in found if post(port, "/api/v1/namespaces", {{"metadata": {{"name": "{PWNED}"}}}})]
print(json.dumps({{"open": sorted(set(found)), "etcd": etcd, "written": written, "created": created}}))
"""
SCAN_REPORT: dict[str, list[int]] = {"etcd": [], "written": [], "created": []}  # and "open": only the view's forwarder


def etcd_keys(cluster: KwokCluster) -> list[str]:
    """The keys of the cluster's etcd that a hostile script would have written, read with etcdctl."""
    done = subprocess.run(
        [str(cluster.bin_dir / "kwokctl"), "--name", cluster.name, "etcdctl", "get", PWNED, "--prefix", "--keys-only"],
        env={**cluster.environment(), **etcd_client_env(cluster.cluster_dir)},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [line for line in done.stdout.splitlines() if line.strip()]


def objects_of(cluster: KwokCluster) -> list[str]:
    """Every namespace and ConfigMap of the cluster, by name."""
    listed = cluster.get_json("namespaces,configmaps", "--all-namespaces")
    return sorted(f"{item['kind']}/{json.dumps(item['metadata'].get('namespace'))}/{item['metadata']['name']}"
                  for item in listed["items"])  # fmt: skip


def fingerprint(*roots: Path) -> dict[str, str]:
    """Every file below ``roots`` with its content's hash."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file() and not path.is_symlink():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
