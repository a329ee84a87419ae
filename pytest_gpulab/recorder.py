"""Each check's evidence (:mod:`pytest_gpulab.grading.evidence`), as a plugin object bound to the run: a fresh record
per check, and one per fixture set up, so that what a fixture read (a module's, shared by a step's checks) counts
as read by every check that uses it, and by none that does not.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from .fixtures import settings_key
from .grading import evidence
from .labs.nearmisses import hidden_names
from .reports.reporting import results_key


class Recorder:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.ledger = evidence.Ledger()  # what the run read, by object: its checks' fields are found through it
        self.by_fixture: dict[str, evidence.Evidence] = {}  # what each fixture read when last set up

    def _fresh(self) -> evidence.Evidence:
        lab = self.config.stash[settings_key].lab
        return evidence.Evidence(self.ledger, hidden_names(lab) if lab is not None else frozenset())

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
        """A fixture's reads are its own; a check takes them when it runs (:meth:`pytest_runtest_call`)."""
        if evidence.EVIDENCE.get() is None:
            return (yield)
        own = self.by_fixture[fixturedef.argname] = self._fresh()
        with evidence.recording(own):
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        """What the check's fixtures read, and what they hand it that the run read before, count as read by it."""
        current = evidence.EVIDENCE.get()
        if current is None:
            return
        for name in getattr(item, "fixturenames", ()):
            if name in self.by_fixture:
                current.take(self.by_fixture[name])
        evidence.note_given(getattr(item, "funcargs", {}).values())
