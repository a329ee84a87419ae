"""Each check's evidence (:mod:`pytest_gpulab.grading.evidence`), as a plugin object bound to the run: a fresh record
per check, and one per fixture set up, so that what a fixture read (a module's, shared by a step's checks) counts
as read by every check that uses it, and by none that does not.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from typing import Any

import pytest

from .grading import evidence
from .labs.nearmisses import hidden_names
from .reports.reporting import results_key
from .settings import settings_key


class Recorder:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.ledger = evidence.Ledger()  # what the run read, by object: its checks' fields are found through it
        self.by_fixture: dict[str, tuple[str, evidence.Evidence]] = {}  # each fixture's last setup: its node, its reads

    @functools.cached_property
    def hidden(self) -> frozenset[str]:
        """The lab's hidden near-miss names, read once for the run (not at each check and fixture)."""
        lab = self.config.stash[settings_key].lab
        return hidden_names(lab) if lab is not None else frozenset()

    def _fresh(self) -> evidence.Evidence:
        return evidence.Evidence(self.ledger, self.hidden)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        run = self.config.stash.get(results_key, {}).get(item.nodeid)
        if run is None:
            return (yield)
        run.evidence = self._fresh()
        with evidence.recording(run.evidence):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any], request: Any) -> Generator[None, Any, Any]:
        """A fixture's reads are its own; a check takes them once set up (:meth:`pytest_runtest_setup`)."""
        if evidence.EVIDENCE.get() is None:
            return (yield)
        own = self._fresh()
        self.by_fixture[fixturedef.argname] = (getattr(request.node, "nodeid", ""), own)
        with evidence.recording(own):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """What the check's fixtures read counts as read by it, even when one of them failed (a file not there)."""
        try:
            return (yield)
        finally:
            current = evidence.EVIDENCE.get()
            if current is not None:
                self._take(current, item)

    def _take(self, current: evidence.Evidence, item: pytest.Item) -> None:
        """The reads of the item's fixtures, each as set up for the item, its module or the session (not one of
        the same name set up for another module, when a fixture before it failed and it was not set up again)."""
        owners = {node.nodeid for node in item.listchain()}
        for name in getattr(item, "fixturenames", ()):
            owner, reads = self.by_fixture.get(name, ("", None))
            if reads is not None and owner in owners:
                current.take(reads)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        """What its fixtures hand it that the run read before (a step's earlier check) counts as read by it too."""
        if evidence.EVIDENCE.get() is not None:
            evidence.note_given(getattr(item, "funcargs", {}).values())
