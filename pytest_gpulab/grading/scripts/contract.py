"""The checks a :class:`~pytest_gpulab.grading.scripts.checker.Checker`'s contract is made of, as plain functions the
plugin collects into its step (``contract-*``): each takes the step's ``checker_cases`` and says, in the lab's
words, which part of the contract a script broke. Usable without pytest: :func:`contract_checks`.
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...sandbox.script_result import ScriptResult
from ..feedback import GradingError, StepFailed, expect, listed
from .checker import CONTRACT, Case, Cases, Check, Checker, expect_answer
from .diagnose import reads_its_arguments
from .keeps import Keeps
from .runs import Run
from .second_run import answers_right, plan_second_run, second_run
from .verdicts import (
    FAILING_API,
    expect_fails_closed,
    expect_read_only,
    expect_uses_its_argument,
    findings_in,
    says_ok,
)


def _verdict(checker: Checker, cases: Cases, case: Case, given: str, **changes: Any) -> None:
    __tracebackhide__ = True
    run = cases.runs.run(*changes.pop("args", case.args), **case.run_options(checker, **changes))
    expect_answer(checker, run.result, given, case)


def _fault_run(checker: Checker, case: Case, fault: str) -> tuple[tuple[str, ...], dict[str, Any], str]:
    """The arguments, options and opening words of ``case``'s run with ``fault``: an API server that fails so,
    or no containerd on PATH."""
    if fault == "without-containerd":
        args = tuple(a for n, a in enumerate(case.args) if n not in checker.file_args)
        options = case.run_options(checker, containerd=False)
        options.pop("dump", None), options.pop("dump_text", None)
        return args, options, "With no containerd on PATH (no containerd command answers)"
    options = case.run_options(checker, api=fault)
    options.pop("view", None)
    return case.args, options, ""


def fails_closed(checker: Checker, fault: str) -> Check:
    def check(checker_cases: Cases) -> None:
        __tracebackhide__ = True
        args, options, given = _fault_run(checker, checker_cases.findings, fault)
        result = checker_cases.runs.run(*args, **options).result
        expect_fails_closed(result, checker.script, fault, prefix=checker.finding or checker.ok, given=given)

    return check


def _digest_or_none(path: Path) -> str | None:
    """The file's bytes, inode and modification time, as one digest: sed -i that changes no byte still wrote it."""
    try:
        stat = path.stat()
        return f"{_digest(path)}:{stat.st_ino}:{stat.st_mtime_ns}"
    except OSError:  # removed, or made a folder
        return None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _writable_copies(checker: Checker, case: Case, folder: Path) -> tuple[tuple[str, ...], dict[int, str | None]]:
    """``case``'s arguments with each file it names copied, writable, into a folder of its own (so a write shows:
    sed -i writes beside it), and each copy's digest before the run."""
    args, digests = list(case.args), dict[int, str | None]()
    for position in (n for n in checker.file_args if n < len(args)):
        own = folder / str(position)
        own.mkdir()
        copy = own / Path(args[position]).name
        shutil.copyfile(args[position], copy)
        copy.chmod(0o666)  # whichever uid the run is given may write it, and its folder, so that a write shows
        own.chmod(0o777)
        digests[position], args[position] = _digest_or_none(copy), str(copy)
    return tuple(args), digests


def _only_reads_run(checker: Checker, cases: Cases, index: int) -> tuple[Run, tuple[str, ...], dict[int, str | None]]:
    """The run ``only-reads`` reads for the findings case (0) or the other (1): the case's own run, or for a
    checker given files, a run on writable copies of them, with their digests before it."""
    case = (cases.findings, cases.other)[index]
    if not any(n < len(case.args) for n in checker.file_args):
        return Run(*case.args, **case.run_options(checker)), case.args, {}
    args, digests = cases.runs.made(
        ("only-reads", index), lambda: _writable_copies(checker, case, cases.runs.folder("only-reads"))
    )
    return Run(*args, **case.run_options(checker, keeps=Keeps(writable_inputs=True))), args, digests


def only_reads(checker: Checker) -> Check:
    def check(checker_cases: Cases) -> None:
        __tracebackhide__ = True
        for index, case in enumerate((checker_cases.findings, checker_cases.other)):
            planned, args, digests = _only_reads_run(checker, checker_cases, index)
            run = checker_cases.runs.run(*planned.args, **planned.options)
            changed = [
                Path(case.args[n]).name for n, digest in digests.items() if _digest_or_none(Path(args[n])) != digest
            ]
            expect(
                not changed,
                f"{case.given}, {checker.script} wrote into the file it was given ({listed(changed)}); a checker only "
                "reads its input: keep notes, copies and marks in a temporary file of its own.",
            )
            expect_read_only(run.result, checker.script, case.given)

    return check


def uses_its_argument(checker: Checker) -> Check:
    def check(checker_cases: Cases) -> None:
        """The same output for both states' arguments ignores them, unless it is the other state's right answer
        (then it missed the findings, which the step's own checks say)."""
        __tracebackhide__ = True
        findings, other = checker_cases.findings, checker_cases.other
        given = {}
        for case in (findings, other):
            run = checker_cases.runs.run(*case.args, **case.run_options(checker))
            given[_shown_args(checker, case.args)] = run.result
        first = next(iter(given.values()))
        missed = answers_right(checker, first, other)
        read = answers_right(checker, first, findings) and reads_its_arguments(first)  # the other run's check names it
        answered = all(_answered(checker, result) for result in given.values())  # a failing run ignores nothing
        expect_uses_its_argument(
            checker.script, given, argument=f"its argument ({listed(checker.args)})",
            expected_differ=answered and not missed and not read,
        )  # fmt: skip

    return check


def _shown_args(checker: Checker, args: tuple[str, ...]) -> str:
    """Arguments as a learner reads them: a file the grader made named by its own name, not the grader's path."""
    shown = [Path(arg).name if n in checker.file_args else arg for n, arg in enumerate(args)]
    return " ".join(shown) or "no argument"


def _answered(checker: Checker, result: ScriptResult) -> bool:
    """Whether the run gave a verdict at all (findings or OK, exit 0 or 1), rather than failing."""
    if result.timed_out or result.exit_code not in (0, 1):
        return False
    return checker.finding is None or bool(findings_in(result.stdout, checker.finding) or says_ok(result.stdout))


def _relative_run(checker: Checker, case: Case) -> tuple[tuple[str, ...], Keeps, str]:
    """``case``'s arguments with each file named relative to the working folder, which holds it."""
    args, inputs = list(case.args), []
    for position in (n for n in checker.file_args if n < len(args)):
        name = f"given/{Path(args[position]).name}"
        inputs.append((name, Path(args[position])))
        args[position] = name
    named = listed(name for name, _ in inputs)
    return (
        tuple(args),
        Keeps(inputs=tuple(inputs)),
        f"{case.given}, as the relative path {named}",
    )


def relative_path(checker: Checker) -> Check:
    def check(checker_cases: Cases) -> None:
        """Both states, each file named relative to the working folder: a script that cannot read it there
        may still stumble on one state's answer, not on both."""
        __tracebackhide__ = True
        for case in (checker_cases.other, checker_cases.findings):
            args, keeps, given = _relative_run(checker, case)
            _verdict(checker, checker_cases, case, given, args=args, keeps=keeps)

    return check


def near_misses(checker: Checker) -> Check:
    def check(checker_cases: Cases) -> None:
        __tracebackhide__ = True
        case = checker_cases.near_misses
        if case is None:
            raise GradingError(
                f"The step declares {checker.script}'s contract but gives no near-miss case (Cases(near_misses=...)): "
                "a checker tried only on the lab's own objects is not tried on what its rule must tell apart."
            )
        _verdict(checker, checker_cases, _hint_if_right_elsewhere(checker, checker_cases, case), case.given)

    return check


def _hint_if_right_elsewhere(checker: Checker, cases: Cases, case: Case) -> Case:
    """A near-miss case's hint names what the rule did not tell apart. A checker that is also wrong on the step's
    own states is wrong for another cause, which their checks name: its near-miss verdict then has no hint."""
    for other in (cases.findings, cases.other):
        try:
            _verdict(checker, cases, other, other.given)
        except StepFailed:
            return replace(case, hint=None)
    return case


def waived(reason: str) -> Check:
    def check(feedback: Any) -> None:
        feedback.note(f"Not checked for this step: {reason}")

    return check


def plan(checker: Checker, cases: Cases) -> None:
    """Start every run ``checker``'s contract checks will read, at once, in the runner's pool: those on an API
    server that fails first (they wait more than they work), then the cases' own, the second run's pair, the
    relative paths and the near misses. Each check then reads its own; a waived check's runs are not made."""
    runs, names = cases.runs, {name for name, _ in _made(checker)} - set(checker.waive)
    planned: list[Run] = []
    for fault in [*sorted(FAILING_API), "without-containerd"]:
        if f"fails-closed-{fault}" in names:
            args, options, _ = _fault_run(checker, cases.findings, fault)
            planned.append(Run(*args, **options))
    planned += [Run(*case.args, **case.run_options(checker)) for case in (cases.findings, cases.other)]
    if "only-reads" in names:
        planned += [_only_reads_run(checker, cases, index)[0] for index in (0, 1)]
    if "relative-path" in names:
        for case in (cases.other, cases.findings):
            args, keeps, _ = _relative_run(checker, case)
            planned.append(Run(*args, **case.run_options(checker, keeps=keeps)))
    if "near-misses" in names and cases.near_misses is not None:
        planned.append(Run(*cases.near_misses.args, **cases.near_misses.run_options(checker)))
    if "second-run" in names:
        plan_second_run(checker, cases)
    runs.ahead(*planned)


def _made(checker: Checker) -> Iterator[tuple[str, Check]]:
    """The contract's checks ``checker`` is held to, by name, none waived."""
    if checker.reads_cluster:
        yield from ((f"fails-closed-{fault}", fails_closed(checker, fault)) for fault in sorted(FAILING_API))
    if checker.reads_containerd:
        yield "fails-closed-without-containerd", fails_closed(checker, "without-containerd")
    if checker.reads_cluster or checker.file_args:
        yield "only-reads", only_reads(checker)
    if checker.args:
        yield "uses-its-argument", uses_its_argument(checker)
    yield "second-run", second_run(checker)
    if checker.file_args:
        yield "relative-path", relative_path(checker)
    if checker.reads_cluster or checker.file_args:
        yield "near-misses", near_misses(checker)


def contract_checks(checker: Checker) -> Iterator[tuple[str, Check]]:
    """Each check of ``checker``'s contract, named as the report shows it (``contract-second-run``)."""
    for name, check in _made(checker):
        yield CONTRACT + name, waived(checker.waive[name]) if name in checker.waive else _noting(checker, check)


def _noting(checker: Checker, check: Check) -> Check:
    """The check, which on failure also notes the contract it holds the script to (the summary's notes show it)."""
    own = inspect.signature(check)
    asks = [*own.parameters.values()]
    if "feedback" not in own.parameters:
        asks.append(inspect.Parameter("feedback", inspect.Parameter.POSITIONAL_OR_KEYWORD))

    def noted(**given: Any) -> None:
        __tracebackhide__ = True
        feedback = given["feedback"] if "feedback" in own.parameters else given.pop("feedback")
        try:
            check(**given)
        except StepFailed as failure:
            if not isinstance(failure, GradingError):
                feedback.note(f"{checker.script} is held to this contract: {checker.contract()}")
            raise

    noted.__signature__ = own.replace(parameters=asks)  # type: ignore[attr-defined]
    noted.__doc__ = check.__doc__
    return noted
