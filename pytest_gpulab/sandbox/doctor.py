"""What a doctored view of the cluster changes in a body the API server sent: the hidden Pods out, the
DaemonSets that own them counting them gone, and the Events about them dropped. Decisions are taken on
the request's canonical path (percent-escapes decoded, as the API server decodes them) and on each
object's kind, never on the raw text of the path."""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

PodKey = tuple[str, str]
DAEMONSET_COUNTS = (
    "desiredNumberScheduled",
    "currentNumberScheduled",
    "numberReady",
    "numberAvailable",
    "updatedNumberScheduled",
)
TABLE_COLUMNS = {"desired", "current", "ready", "up-to-date", "available"}
POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/?]+)")
# Headers the proxy sets itself; Content-Type passes through (aggregated discovery is told apart by it).
OWN_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive", "date", "server"}


def status(code: int, reason: str, message: str) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    return json.dumps({**body, "message": message, "reason": reason, "code": code}).encode()


def key_of(meta: Any) -> PodKey:
    meta = meta if isinstance(meta, dict) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def json_accept(accept: str | None) -> str:
    """The client's Accept without protobuf: kubectl's Table request stays a Table, in JSON."""
    kept = [part.strip() for part in (accept or "").split(",") if part.strip() and "protobuf" not in part]
    return ", ".join(kept) or "application/json"


class Doctor:
    """What the view changes in a body: hidden Pods out, their DaemonSets' counts down."""

    def __init__(
        self,
        hidden: Iterable[PodKey],
        owners: Counter[PodKey],
        taints: Mapping[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        self.hidden = set(hidden)
        self.owners = owners  # (namespace, daemonset) -> hidden Pods it owns
        self.taints = dict(taints or {})  # node -> taints it is shown with, besides its own

    def node(self, node: dict[str, Any]) -> dict[str, Any]:
        added = self.taints.get(key_of(node.get("metadata"))[1])
        if not added:
            return node
        spec = dict(node.get("spec") or {})
        return {**node, "spec": {**spec, "taints": [*(spec.get("taints") or []), *added]}}

    def hides(self, meta: Any) -> bool:
        return key_of(meta) in self.hidden

    def daemonset(self, ds: dict[str, Any]) -> dict[str, Any]:
        meta, counts = ds.get("metadata") or {}, dict(ds.get("status") or {})
        gone = self.owners[key_of(meta)]
        for key in DAEMONSET_COUNTS:
            if isinstance(counts.get(key), int):
                counts[key] = max(0, counts[key] - gone)
        return {**ds, "status": counts} if gone else ds

    def table(self, table: dict[str, Any], path: str) -> dict[str, Any]:
        rows = [row for row in table.get("rows") or [] if isinstance(row, dict)]
        if "/pods" in path:
            rows = [row for row in rows if not self.hides((row.get("object") or {}).get("metadata"))]
        elif "/events" in path:  # a row's object may be metadata alone: its cells say what it says
            names = [name for _, name in self.hidden]
            rows = [
                row for row in rows
                if not self.about_hidden(row.get("object")) and not any(n in json.dumps(row.get("cells")) for n in names)
            ]  # fmt: skip
        elif "/daemonsets" in path:
            names = [str(c.get("name", "")).lower() for c in table.get("columnDefinitions") or []]
            rows = [self._table_row(row, names) for row in rows]
        return {**table, "rows": rows}

    def _table_row(self, row: dict[str, Any], names: list[str]) -> dict[str, Any]:
        meta = (row.get("object") or {}).get("metadata") or {}
        gone = self.owners[key_of(meta)]
        cells = [
            max(0, cell - gone) if name in TABLE_COLUMNS and isinstance(cell, int) else cell
            for name, cell in zip(names, row.get("cells") or [], strict=False)
        ]
        return {**row, "cells": cells} if gone else row

    def about_hidden(self, event: Any) -> bool:
        """Whether an Event (core/v1 or events.k8s.io/v1) would name a hidden Pod: one about it, or one
        whose message names it (the DaemonSet controller's "Created pod: NAME")."""
        if not isinstance(event, dict):
            return False
        subject = event.get("involvedObject") or event.get("regarding") or {}
        if isinstance(subject, dict) and subject.get("kind") == "Pod" and key_of(subject) in self.hidden:
            return True
        text = f"{event.get('message') or ''} {event.get('note') or ''}"
        namespace = key_of(event.get("metadata"))[0]
        return any(name in text for space, name in self.hidden if space == namespace)

    def body(self, obj: Any, path: str) -> Any:
        """``obj`` as the view shows it; None when it is a hidden Pod, or an Event about one."""
        if not isinstance(obj, dict):
            return obj
        kind = obj.get("kind")
        if (kind == "Pod" and self.hides(obj.get("metadata"))) or (kind == "Event" and self.about_hidden(obj)):
            return None
        if kind == "EventList":
            return {**obj, "items": [event for event in obj.get("items") or [] if not self.about_hidden(event)]}
        if kind == "PodList":
            return {**obj, "items": [pod for pod in obj.get("items") or [] if not self.hides(pod.get("metadata"))]}
        if kind == "Node":
            return self.node(obj)
        if kind == "NodeList":
            return {**obj, "items": [self.node(node) for node in obj.get("items") or []]}
        if kind == "DaemonSet":
            return self.daemonset(obj)
        if kind == "DaemonSetList":
            return {**obj, "items": [self.daemonset(ds) for ds in obj.get("items") or []]}
        if kind == "Table":
            return self.table(obj, path)
        return obj

    def event(self, line: bytes, path: str) -> bytes | None:
        """One watch event as the view shows it; None when it is about a hidden Pod."""
        try:
            event = json.loads(line)
        except ValueError:
            return line
        shown = self.body(event.get("object"), path) if isinstance(event, dict) else event
        if shown is None:
            return None
        return json.dumps({**event, "object": shown}).encode() + b"\n" if isinstance(event, dict) else line


def canonical(path: str) -> str:
    """The path as the API server reads it: percent-escapes decoded, ``.``, ``..`` and ``//`` folded."""
    decoded = posixpath.normpath(unquote(path))
    return decoded[1:] if decoded.startswith("//") else decoded
