"""The runs of one learner script a step's checks share, started ahead side by side:
``script_runner.runs_of(learner.file(SCRIPT)).ahead(Run(dump="v2-runc-only"), Run("ns", cluster=True))``.
Usable without pytest.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .learner import LearnerFile

if TYPE_CHECKING:
    from .script_runner import LearnerRun, ScriptRunner


class Run:
    """A run of a script to start ahead of the checks that read it: ``Run("arg", dump="v2-runc-only")``.

    Example:: script_runner.runs_of(learner.file(SCRIPT)).ahead(Run(dump="v2-runc-only"), Run("ns", cluster=True))
    """

    def __init__(self, *args: str, **options: Any) -> None:
        self.args, self.options = args, options

    @property
    def key(self) -> tuple[object, ...]:
        return (self.args, tuple(sorted(self.options.items())))


class ScriptRuns:
    """The runs of one learner script, each distinct run made once: a step's checks share them."""

    def __init__(self, runner: ScriptRunner, script: Path | LearnerFile) -> None:
        self.runner = runner
        self.script = script
        self._runs: dict[tuple[object, ...], Future[LearnerRun]] = {}

    def ahead(self, *runs: Run) -> ScriptRuns:
        """Start ``runs`` side by side now (they do not depend on each other); a check then waits for its own."""
        for planned in runs:
            if planned.key not in self._runs:
                self._runs[planned.key] = self.runner.pool.submit(
                    self.runner.run, self.script, *planned.args, **planned.options
                )
        return self

    def run(self, *args: str, **options: Any) -> LearnerRun:
        """As :meth:`ScriptRunner.run`; the same arguments and options give the same (first) run."""
        __tracebackhide__ = True
        planned = Run(*args, **options)
        if planned.key not in self._runs:
            done: Future[LearnerRun] = Future()
            try:
                done.set_result(self.runner.run(self.script, *args, **options))
            except Exception as failure:  # a check failure (no such script) is every asker's
                done.set_exception(failure)
            self._runs[planned.key] = done
        return self._runs[planned.key].result()
