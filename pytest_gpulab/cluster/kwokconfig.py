"""The kwokctl configuration every lab cluster gets: a fast start, and components only the grader reaches.

Speed: one etcd member elects itself at once, and single-instance components skip leader election.

Reach: every component listens on 127.0.0.1 (kwokctl's ``bindAddress`` option, 0.0.0.0 unless set).
The API server reaches etcd through a Unix socket in the user's runtime directory, which only the
user can enter (``ports.runtime_dir``): no TLS handshake for each of its 60-odd etcd connections,
which would make the start 0.2 s slower. etcd's TCP ports (client, for ``kwokctl snapshot save``,
and peer) serve TLS only, to clients with a certificate of the cluster's own CA: the pki kwokctl
makes in the cluster's directory (``pki/``: a CA and one certificate, server and client, that every
component uses). So a local user who can open a TCP connection to etcd cannot read or write the
cluster's state, and no other cluster's API server can use this etcd.

kwokctl writes etcd's URLs and the API server's ``--etcd-servers`` as http:// on TCP
(kwok v0.8.0's ``pkg/kwokctl/components/etcd.go`` lines 136-140, ``kube_apiserver.go`` line 130):
they are replaced here (``override: true``, ``applyComponentArgsOverride`` in
``pkg/kwokctl/runtime/util.go``), which needs the ports before the cluster is created (``ports.py``).
kwokctl's ``snapshot save`` runs ``etcdctl --endpoints 127.0.0.1:PORT`` with no TLS flag and no
other address (``pkg/kwokctl/runtime/binary/cluster_tools.go`` line 33), in kwokctl's own environment
(``pkg/utils/exec/exec.go`` line 211): :func:`etcd_client_env` gives etcdctl the certificate there.

Nodes: the kwok controller manages only nodes annotated ``kwok.x-k8s.io/node: fake``, as the labs say, so
a node made without it stays NotReady. kwokctl's binary runtime passes no selector to the controller
(``pkg/kwokctl/runtime/binary/cluster_kwok_controller.go`` line 52; only the kind runtime does, line 78),
so ``BuildKwokControllerComponent`` writes ``--manage-all-nodes=true`` (``pkg/kwokctl/components/
kwok_controller.go`` lines 57-65). A KwokConfiguration's ``manageAllNodes: false`` would lose to that
flag, so the flag itself is replaced and the annotation selector added (:data:`ALL_NODES`, :data:`NODE_SELECTOR`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

LOOPBACK = "127.0.0.1"
MEMBER = "node0"  # the name kwokctl gives the one etcd member (--name)
TLS_CLIENT_URL = re.compile(r"--listen-client-urls=\S*https://")  # in kwokctl's record of the cluster, kwok.yaml

SPEED_PATCHES: dict[str, dict[str, str]] = {
    "etcd": {"heartbeat-interval": "10", "election-timeout": "100"},
    "kube-controller-manager": {"leader-elect": "false"},
    "kube-scheduler": {"leader-elect": "false"},
}

ANNOTATION = "kwok.x-k8s.io/node"  # the annotation of the nodes kwok manages, with the value "fake"
ALL_NODES = {"manage-all-nodes": "false"}  # replaces kwokctl's --manage-all-nodes=true
NODE_SELECTOR = {"manage-nodes-with-annotation-selector": f"{ANNOTATION}=fake"}


def pki(cluster_dir: Path) -> dict[str, str]:
    """The CA, certificate and key kwokctl makes for the cluster (``CLUSTER/pki``)."""
    folder = cluster_dir / "pki"
    return {"ca": str(folder / "ca.crt"), "cert": str(folder / "admin.crt"), "key": str(folder / "admin.key")}


def _args(values: Mapping[str, str], *, override: bool = False) -> list[dict[str, object]]:
    return [{"key": key, "value": value, **({"override": True} if override else {})} for key, value in values.items()]


def _etcd_tls(options: Mapping[str, object], files: Mapping[str, str], socket: Path) -> list[dict[str, object]]:
    client, peer = f"https://{LOOPBACK}:{options['etcdPort']}", f"https://{LOOPBACK}:{options['etcdPeerPort']}"
    urls = {
        "listen-client-urls": f"unix://{socket},{client}",
        "advertise-client-urls": client,
        "listen-peer-urls": peer,
        "initial-advertise-peer-urls": peer,
        "initial-cluster": f"{MEMBER}={peer}",
    }
    certificates = {"cert-file": files["cert"], "key-file": files["key"], "trusted-ca-file": files["ca"]}
    return _args(urls, override=True) + _args(
        {
            **certificates,
            **{f"peer-{key}": value for key, value in certificates.items()},
            "client-cert-auth": "true",
            "peer-client-cert-auth": "true",
        }
    )


def kwokctl_config(
    bin_dir: Path, cluster_dir: Path, options: Mapping[str, object], socket: Path,
    component_args: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, object]:  # fmt: skip
    """The KwokctlConfiguration; ``options`` must name etcd's two ports (``etcdPort``, ``etcdPeerPort``), and
    ``socket`` is the path of etcd's Unix socket, in a directory only this user can enter. ``component_args``
    adds flags to components (``{"kube-apiserver": {"flag": "value"}}``)."""
    patches = {name: _args(values) for name, values in SPEED_PATCHES.items()}
    patches["etcd"] += _etcd_tls(options, pki(cluster_dir), socket)
    patches["kube-apiserver"] = _args({"etcd-servers": f"unix://{socket}"}, override=True)
    patches["kwok-controller"] = _args(ALL_NODES, override=True) + _args(NODE_SELECTOR)
    for name, values in (component_args or {}).items():
        patches[name] = patches.get(name, []) + _args(values)  # added (kwok overrides only a flag it sets)
    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "componentsPatches": [{"name": name, "extraArgs": args} for name, args in patches.items()],
        # our etcdctl and etcdutl for ``kwokctl snapshot`` (it would download them)
        "options": {
            "etcdctlBinary": str(bin_dir / "etcdctl"),
            "etcdutlBinary": str(bin_dir / "etcdutl"),
            **options,
            "bindAddress": LOOPBACK,
        },
    }


def write_kwokctl_config(
    directory: Path, bin_dir: Path, cluster_dir: Path, options: Mapping[str, object], socket: Path,
    component_args: Mapping[str, Mapping[str, str]] | None = None,
) -> Path:  # fmt: skip
    path = directory / "kwokctl-config.yaml"
    config = kwokctl_config(bin_dir, cluster_dir, options, socket, component_args)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def etcd_client_env(cluster_dir: Path) -> dict[str, str]:
    """etcdctl's certificate (``ETCDCTL_*``) for kwokctl's commands that reach etcd (``snapshot save``);
    none for a cluster whose etcd serves plain HTTP (one started before etcd took TLS)."""
    try:
        tls = TLS_CLIENT_URL.search((cluster_dir / "kwok.yaml").read_text()) is not None
    except OSError:
        tls = False
    files = pki(cluster_dir)
    return {"ETCDCTL_CACERT": files["ca"], "ETCDCTL_CERT": files["cert"], "ETCDCTL_KEY": files["key"]} if tls else {}
