"""The reports of one grading run, as a plugin object bound to its config.

The grading report is written when the run starts, after every check and at the
end; SIGTERM writes it before the run stops as interrupted. The terminal
summary, pytest-json-report's ``gpulab`` object and Gradescope's results are
made from the same records.
"""

from __future__ import annotations

import signal
import time
import warnings
from types import FrameType
from typing import Any

import pytest

from .fixtures import connection_key, settings_key
from .reports import gradescope, report_file, summary
from .reports.reporting import NOT_GRADED, StepResult, results_key, step_results
from .sandbox import confine as sandbox
from .settings import RunSettings

INTERRUPTED_BY = {pytest.ExitCode.INTERRUPTED: "interrupted", pytest.ExitCode.INTERNAL_ERROR: "internal error"}


class GradingReports:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.time()
        self.interrupted: str | None = None
        self._previous_sigterm: Any = None

    @property
    def settings(self) -> RunSettings:
        """Read each time: collecting a lab folder without --lab settles the lab late."""
        return self.config.stash[settings_key]

    def results(self) -> list[StepResult]:
        return step_results(self.config)

    def info(self) -> report_file.RunInfo:
        lab = self.settings.lab
        chosen = ",".join(map(str, sorted(self.settings.steps))) if self.settings.steps else None
        return report_file.RunInfo(
            lab.name if lab else None,
            lab.title if lab else None,
            lab.rubric_version if lab else None,
            self.settings.seed,
            self.started,
            chosen,
            sandbox.probe().describe(),
        )

    def document(self, *, complete: bool) -> dict[str, Any]:
        data = report_file.document(self.info(), self.results(), complete=complete, interrupted=self.interrupted)
        return {**data, "cluster_reads": self.cluster_reads()}

    def cluster_reads(self) -> dict[str, int] | None:
        """What the grading asked of the API server (None before it first did): the same at any cluster size."""
        connection = self.config.stash.get(connection_key, None)
        if connection is None or connection.live is None:
            return None
        return {"requests": connection.live.reads, "bytes": connection.live.received}

    def write(self, *, complete: bool = False) -> None:
        if self.settings.report is None:
            return
        try:
            report_file.write_atomically(self.settings.report, self.document(complete=complete))
        except OSError as error:
            warnings.warn(f"the grading report {self.settings.report} could not be written: {error}", stacklevel=1)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = "SIGTERM"
        self.write()
        raise KeyboardInterrupt("SIGTERM")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.write()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and report.nodeid in self.config.stash.get(results_key, {}):
            self.write()

    @pytest.hookimpl(tryfirst=True)  # before pytest-json-report's, which may fail
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        if exitstatus in INTERRUPTED_BY and self.interrupted is None:
            self.interrupted = INTERRUPTED_BY[pytest.ExitCode(exitstatus)]
        self.write(complete=self.interrupted is None and self._all_chosen_ran())
        self._write_gradescope()

    def _all_chosen_ran(self) -> bool:
        chosen = self.settings.steps
        runs = self.config.stash.get(results_key, {}).values()
        return all(run.outcome != NOT_GRADED for run in runs if chosen is None or run.step.number in chosen)

    def _write_gradescope(self) -> None:
        lab = self.settings.lab
        if self.settings.gradescope is None or lab is None:
            return
        data = gradescope.results(self.results(), time.time() - self.started, lab.name, lab.rubric_version)
        try:
            report_file.write_atomically(self.settings.gradescope, data)
        except OSError as error:
            warnings.warn(
                f"the Gradescope results {self.settings.gradescope} could not be written: {error}", stacklevel=1
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        if self.config.stash.get(results_key, {}):
            json_report["gpulab"] = self.document(complete=self._all_chosen_ran() and self.interrupted is None)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lab = self.settings.lab
        results = self.results()
        if lab is None or not results:
            return
        terminalreporter.section(f"lab {lab.name}: {lab.title}")
        notes = dict.fromkeys(f"note on step {r.step.number}: {n}" for r in results for c in r.checks for n in c.notes)
        for line in summary.terminal_lines(results, lab.name, lab.rubric_version, self.settings.seed, list(notes)):
            terminalreporter.write_line(line)
