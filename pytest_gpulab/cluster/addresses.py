"""Addresses a bundle's snapshot may not bring in: an object's address that is the grading machine's own
(loopback, link-local, unspecified, or one of its interfaces'). The API server dials such an address for
a proxy, a log or a port-forward; the read-only view refuses those requests, and a snapshot holding one is
refused before grading too, as no lab makes one. Usable without pytest.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

Item = dict[str, Any]


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _ips(entries: Any, key: str = "ip") -> list[str]:
    return [str(entry.get(key)) for entry in entries or [] if isinstance(entry, dict) and entry.get(key)]


# Each kind's addresses the API server may dial: a Pod's, an Endpoints' and an EndpointSlice's, a node's IP
# addresses (its Hostname, "localhost" under kwok, is not dialled by a grading: the view refuses node proxies),
# and a Service's external ones.
ADDRESSES: dict[str, Callable[[Item], list[str]]] = {
    "/api/v1/pods": lambda item: [
        *[a for a in (_get(item, "status", "podIP"), _get(item, "status", "hostIP")) if a],
        *_ips(_get(item, "status", "podIPs")), *_ips(_get(item, "status", "hostIPs")),
    ],
    "/api/v1/endpoints": lambda item: [
        ip for subset in item.get("subsets") or [] if isinstance(subset, dict)
        for ip in _ips(subset.get("addresses")) + _ips(subset.get("notReadyAddresses"))
    ],
    "/apis/discovery.k8s.io/v1/endpointslices": lambda item: [
        str(address) for endpoint in item.get("endpoints") or [] if isinstance(endpoint, dict)
        for address in endpoint.get("addresses") or []
    ],
    "/api/v1/nodes": lambda item: [
        str(a.get("address")) for a in _get(item, "status", "addresses") or []
        if isinstance(a, dict) and a.get("type") in ("InternalIP", "ExternalIP")
    ],
    "/api/v1/services": lambda item: [
        *[str(ip) for ip in _get(item, "spec", "externalIPs") or []],
        *[name for name in [_get(item, "spec", "externalName")] if name],
    ],
}  # fmt: skip


@cache
def machine_addresses() -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """This machine's interface addresses (``ip -j addr``; none known if it cannot say)."""
    try:
        shown = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, timeout=10, check=True).stdout
        links = json.loads(shown)
    except (OSError, subprocess.SubprocessError, ValueError):
        return frozenset()
    found = set()
    for link in links if isinstance(links, list) else []:
        for info in link.get("addr_info") or []:
            try:
                found.add(ipaddress.ip_address(str(info.get("local")).split("%")[0]))
            except ValueError:
                continue
    return frozenset(found)


def the_machine_s(address: str) -> bool:
    """Whether ``address`` (an IP, or a name) leads to the grading machine itself or its link."""
    text = address.strip().rstrip(".").lower()
    if text == "localhost" or text.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip in machine_addresses()


def _the_api_server_s(item: Item) -> bool:
    """The ``kubernetes`` Service's endpoints: the API server writes its own address there as it starts."""
    meta = item.get("metadata") or {}
    service = (meta.get("labels") or {}).get("kubernetes.io/service-name", meta.get("name"))
    return meta.get("namespace") == "default" and service == "kubernetes"


def addressed_home(items_of: Callable[[str], Iterable[Item] | None]) -> list[str]:
    """Each object whose address is the machine's own, as ``kind/namespace/name (address)``; the API server's own
    endpoints, which the grading cluster's API server writes itself, apart."""
    found = []
    for path, addresses in ADDRESSES.items():
        for item in items_of(path) or []:
            if "endpoint" in path and _the_api_server_s(item):
                continue
            meta = item.get("metadata") or {}
            where = "/".join(part for part in (path.rsplit("/", 1)[1], meta.get("namespace"), meta.get("name")) if part)
            found += [f"{where} ({address})" for address in addresses(item) if the_machine_s(address)]
    return found
