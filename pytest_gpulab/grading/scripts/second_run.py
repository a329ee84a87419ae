"""The second run of a checker's contract: the same command line twice, with one kept $TMPDIR, /tmp and $HOME, the
state changed between. Planned with the step's other runs (:func:`plan_second_run`, where the first run of the pair
may be one the step already asks for) and checked by :func:`second_run`. Usable without pytest.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ...sandbox.script_result import ScriptResult, said
from ..feedback import StepFailed, expect
from .checker import Case, Cases, Check, Checker, expect_answer
from .keeps import Keeps
from .runs import LearnerRun, Run

STALE_HINT = (
    "Decide from what it reads at each run: an answer kept from an earlier run (a cache in /tmp or $HOME) goes "
    "stale when the cluster or containerd changes."
)


def answers_right(checker: Checker, result: ScriptResult, case: Case) -> bool:
    """Whether the run gave the case's answer."""
    try:
        expect_answer(checker, result, "", case)
    except StepFailed:
        return False
    return True


def _same_arguments(checker: Checker, first: Case, then: Case, folder: Path) -> tuple[Case, Case]:
    """The two cases with ``then``'s arguments, each file they name copied in turn to one path: the same command
    line twice, the state changed between (a cache keyed by its arguments is found out too)."""
    first_args, then_args = list(then.args), list(then.args)
    for position in (n for n in checker.file_args if n < len(then.args)):
        folder.mkdir(parents=True, exist_ok=True)
        first_args[position] = then_args[position] = str(folder / Path(then.args[position]).name)
    return replace(first, args=tuple(first_args)), replace(then, args=tuple(then_args))


def _place(checker: Checker, case: Case, placed: Case) -> None:
    """``case``'s files copied where ``placed`` names them."""
    for position in (n for n in checker.file_args if n < len(case.args) and n < len(placed.args)):
        if placed.args[position] != case.args[position]:
            shutil.copyfile(case.args[position], placed.args[position])


def _second_pair(checker: Checker, cases: Cases) -> tuple[Case, Case, Keeps, Path]:
    """The second run's pair: ``then``'s command line run twice with one kept $TMPDIR, /tmp and $HOME, in
    ``first``'s state and then in ``then``'s; the kept state, and the folder for their inputs."""
    first, then = cases.changed or cases.other, cases.findings
    folder = cases.runs.made(("second-run",), lambda: cases.runs.folder("second-run"))
    once, twice = _same_arguments(checker, first, then, folder / "input")
    return once, twice, Keeps(state=folder / "kept"), folder


def _second_runs(checker: Checker, cases: Cases, *, first_made: bool = False) -> Callable[[], LearnerRun]:
    """The pair made one after the other (or, with ``first_made``, its second alone); returns the second run."""
    first, then = cases.changed or cases.other, cases.findings
    runner, script = cases.runs.runner, cases.runs.script
    once, twice, kept, _ = _second_pair(checker, cases)

    def pair() -> LearnerRun:
        if not first_made:
            _place(checker, first, once)
            runner.run(script, *once.args, **first.run_options(checker, keeps=kept))
        _place(checker, then, twice)
        return runner.run(script, *twice.args, **then.run_options(checker, keeps=kept))

    return pair


def plan_second_run(checker: Checker, cases: Cases) -> None:
    """The pair, planned: where ``first``'s own run has ``then``'s arguments (no file copied), that run is the
    pair's first, made with the kept state; the second starts as soon as it ends."""
    first = cases.changed or cases.other
    once, _, kept, _ = _second_pair(checker, cases)
    own = Run(*first.args, **first.run_options(checker))
    if once.args == first.args and cases.runs.keep_state(own, kept):
        cases.runs.ahead(own)
        cases.runs.after(("second-run",), own, _second_runs(checker, cases, first_made=True))
        return
    cases.runs.after(("second-run",), None, _second_runs(checker, cases))


def second_run(checker: Checker) -> Check:
    def check(checker_cases: Cases) -> None:
        """The same command line twice, with the same $TMPDIR, /tmp and $HOME, the state changed between: the second
        answer is the one a first run in that state gives; where that one is right, it must be."""
        __tracebackhide__ = True
        first, then = checker_cases.changed or checker_cases.other, checker_cases.findings
        second = checker_cases.runs.task(("second-run",), _second_runs(checker, checker_cases))
        given = f"{then.given}, on its second run (the first in another state, with the same arguments, $TMPDIR, /tmp and $HOME)"
        fresh = checker_cases.runs.run(*then.args, **then.run_options(checker)).result
        if answers_right(checker, fresh, then):
            expect_answer(checker, second.result, given, then, hint=STALE_HINT)
            return
        alike = (fresh.stdout.strip(), fresh.exit_code) == (second.result.stdout.strip(), second.result.exit_code)
        expect(
            alike,
            f"{given}, {checker.script} {second.result.describe()}{said(second.result)}, not what it answers on a "
            "first run in that state: it carries something over from the run before.",
            hint=STALE_HINT,
            detail={
                "first_run": first.given,
                "first_run_stdout": fresh.stdout,
                "second_run_stdout": second.result.stdout,
            },
        )

    return check
