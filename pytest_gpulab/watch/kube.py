"""The lab cluster's objects of the kinds the lab reads: one watch per kind (the official client's), in a thread.

Each kind is listed once, then watched from that list's resourceVersion; a watch the server ends is taken up
again from the last version seen (a 410 Gone lists anew, and reports what differs from the objects known). A
change that only renews what nobody grades (resourceVersion, managedFields, a condition's heartbeat time) is
not reported: kwok renews nodes' heartbeats on its own. A custom kind not yet served waits for a change of
CustomResourceDefinitions. Only GET requests are sent. Usable without pytest.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..cluster.transport import Transport
from ..labs.errors import ApiError, ConfigError, TransportError
from ..labs.kinds import DISCOVERY_ACCEPT, Resource, from_discovery, known
from .changes import OBJECT, Change, Report

CRD = "CustomResourceDefinition"
WATCH_SECONDS = 300  # the server ends each watch after this; it is taken up again at once
REQUEST_TIMEOUT = 10
RETRY_SECONDS = (0.5, 1, 2, 5)  # after a failed list or watch: the cluster may be restarting


def digest(obj: dict[str, Any]) -> str:
    """What the graders could read of an object, hashed: its bookkeeping and heartbeats left out."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    status = dict(obj.get("status") or {}) if isinstance(obj.get("status"), dict) else obj.get("status")
    if isinstance(status, dict) and isinstance(status.get("conditions"), list):
        status["conditions"] = [
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"} if isinstance(c, dict) else c
            for c in status["conditions"]
        ]
    kept = {**obj, "metadata": metadata, "status": status}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def _key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


class KindWatch:
    """One kind's watch; ``report`` is called with each change (from this watch's thread)."""

    def __init__(self, transport: Transport, kind: str, report: Report, served: Callable[[], None]) -> None:
        """``served`` is called when CustomResourceDefinitions change (by that kind's watch)."""
        self.transport = transport
        self.kind = kind
        self.report = report
        self.served = served
        self.discovered = threading.Event()  # set when the kinds served may have changed
        self.problem: str | None = None  # why it is not watching now, for the view
        self._known: dict[str, str] | None = None  # key -> digest, once listed
        self.listed = threading.Event()  # listed once (or found unserved, or failed): the first grading may start
        self._stop = threading.Event()
        self._close: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, name=f"gpulab-watch-{kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if (close := self._close) is not None:
            close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                resource = self._resource()
                if resource is None:
                    self.problem = f"the cluster serves no kind {self.kind} yet"
                    self.listed.set()
                    self._wait_for_discovery()
                    self._known = self._known or {}  # served later: every object then found is a change
                    continue
                self._list_and_watch(resource)
                failures, self.problem = 0, None
            except (ApiError, TransportError) as error:
                if self._stop.is_set():  # the watch's connection was shut down to stop it
                    return
                self.problem = f"{self.kind} is not watched now ({error})"
                self.listed.set()
                self._stop.wait(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
                failures += 1

    def _wait_for_discovery(self) -> None:
        while not self._stop.is_set() and not self.discovered.wait(0.25):
            continue
        self.discovered.clear()

    def _resource(self) -> Resource | None:
        found = known(self.kind)
        if found is not None:
            return found
        documents = [self._get(path, accept=DISCOVERY_ACCEPT) for path in ("/api", "/apis")]
        return next((r for r in from_discovery(documents) if r.answers_to(self.kind)), None)

    def _get(self, path: str, query: dict[str, str] | None = None, accept: str = "application/json") -> Any:
        return self.transport.request("GET", path, query or {}, {"Accept": accept}, None, REQUEST_TIMEOUT)

    def _list_and_watch(self, resource: Resource) -> None:
        listing = self._get(resource.path()) or {}
        self._take(listing.get("items") or [], complete=True)
        self.problem = None
        self.listed.set()
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        while not self._stop.is_set() and version:
            version = self._watch(resource, version)

    def _watch(self, resource: Resource, version: str) -> str:
        """Events from ``version`` until the server ends the watch; the version to go on from ('' to list anew)."""
        query = {"resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
        for event in self.transport.watch(resource.path(), query, WATCH_SECONDS + 30, opened=self._opened):
            found = event.get("object")
            obj: dict[str, Any] = found if isinstance(found, dict) else {}
            if event.get("type") == "ERROR":
                return ""
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if event.get("type") == "DELETED":
                self._gone(_key(obj))
            elif event.get("type") in ("ADDED", "MODIFIED"):
                self._take([obj], complete=False)
        return version

    def _opened(self, close: Callable[[], None]) -> None:
        self._close = close
        if self._stop.is_set():
            close()

    def _take(self, objects: Iterable[dict[str, Any]], *, complete: bool) -> None:
        """Objects seen (all of them when ``complete``): those new or changed are reported, after the first list."""
        first = self._known is None
        known_now = {} if first else dict(self._known or {})
        seen = {_key(obj): digest(obj) for obj in objects if isinstance(obj, dict)}
        changed = [key for key, value in seen.items() if known_now.get(key) != value]
        gone = [key for key in known_now if key not in seen] if complete else []
        known_now.update(seen)
        self._known = known_now
        for key in [] if first else gone:
            self._gone(key)
        for key in [] if first else changed:
            self.report(Change(OBJECT, key, self.kind))
        if self.kind == CRD and not first and (changed or gone):
            self.served()

    def _gone(self, key: str) -> None:
        if self._known is not None and self._known.pop(key, None) is not None:
            self.report(Change(OBJECT, key, self.kind))
            if self.kind == CRD:
                self.served()


class ClusterWatch:
    """A watch per kind of ``kinds`` on the cluster of ``kubeconfig``."""

    def __init__(self, kubeconfig: str | None, kinds: Iterable[str], report: Report) -> None:
        self.transport = Transport(kubeconfig)
        custom = [kind for kind in kinds if known(kind) is None]
        names = sorted(set(kinds) | ({CRD} if custom else set()))
        self.watches = [KindWatch(self.transport, kind, report, self._discovered) for kind in names]

    @classmethod
    def open(cls, kubeconfig: str | None, kinds: Iterable[str], report: Report) -> ClusterWatch | str:
        """The watch, or why the kubeconfig cannot be used."""
        try:
            return cls(kubeconfig, kinds, report)
        except ConfigError as error:
            return f"the kubeconfig {kubeconfig or '~/.kube/config'} could not be loaded ({error})"

    def start(self, timeout: float = 30) -> None:
        """Every watch started, and listed once (within ``timeout``): no change after this is missed."""
        for watch in self.watches:
            watch.start()
        deadline = time.monotonic() + timeout
        for watch in self.watches:
            watch.listed.wait(max(0.0, deadline - time.monotonic()))

    def _discovered(self) -> None:
        for watch in self.watches:
            watch.discovered.set()

    def problems(self) -> list[str]:
        return [watch.problem for watch in self.watches if watch.problem]

    def stop(self) -> None:
        for watch in self.watches:
            watch.stop()
        for watch in self.watches:
            watch.join(30)
        self.transport.close()
