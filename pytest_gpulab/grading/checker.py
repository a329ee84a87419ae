"""A learner checker's contract, declared once in its step; the plugin makes the contract's checks from it.

A step that asks for a checker script declares it::

    CHECKER = Checker("bin/ds-coverage.sh", args=("NAMESPACE",), finding="MISSING", reads_cluster=True)

and gives, in a fixture named ``checker_cases``, two states it knows the answers to: one with findings and
one whose answer differs (:class:`Cases`). The plugin then adds to the step, as checks named
``contract-*``, what every checker is held to, whatever the lab:

- ``contract-fails-closed-unavailable``/``-unreachable`` (``reads_cluster``): with the API server answering
  503, or nothing, it exits non-zero without OK; ``-without-containerd`` (``reads_containerd``) likewise;
- ``contract-only-reads``: it changes neither the cluster nor the files it is given (given writable copies,
  so a write shows), with ``file_args`` or ``reads_cluster``;
- ``contract-uses-its-argument``: given the two states' arguments, whose answers differ, it answers apart;
- ``contract-second-run``: run first on the other state, then on the one with findings, in one kept
  $TMPDIR, /tmp and $HOME, its second answer follows the change (no answer kept from the first run);
- ``contract-relative-path`` (``file_args``): the same answer for a file named relative to a working
  directory that is not its own;
- ``contract-near-misses`` (``reads_cluster`` or ``file_args``): the right answer on a state holding what the
  lab never makes but its rule must tell apart (``Cases.near_misses``).

An author leaves one out only by naming it with a reason (``waive={"second-run": "why"}``), which the
report shows. :meth:`Checker.contract` is the one-line contract ``gpulab labs LAB`` shows. Usable
without pytest: :func:`contract_checks` returns the checks as plain functions.
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sandbox.script_result import ScriptResult, said
from .feedback import GradingError, StepFailed, expect, listed
from .keeps import Keeps
from .runs import ScriptRuns
from .verdicts import FAILING_API, expect_fails_closed, expect_read_only, expect_uses_its_argument, expect_verdict

CONTRACT = "contract-"


@dataclass(frozen=True)
class Checker:
    """A learner's checker script and what it is held to. ``args`` name its arguments as the lab does
    (``"[DUMP]"`` for an optional one); ``file_args`` are the positions of those that name a file it reads;
    ``finding`` is the prefix of its finding lines (``MISSING`` for ``MISSING=...``), or None for a checker
    whose answer is its exit status alone (0: all is well, non-zero: it found a problem).

    Example:: CHECKER = Checker("bin/ds-coverage.sh", args=("NAMESPACE",), finding="MISSING", reads_cluster=True)
    """

    script: str
    args: tuple[str, ...] = ()
    finding: str | None = "MISSING"
    ok: str = "OK"
    reads_cluster: bool = False
    reads_containerd: bool = False
    file_args: tuple[int, ...] = ()
    waive: Mapping[str, str] = field(default_factory=dict)
    kinds: tuple[str, ...] = ()  # "at least" these reasons: a finding of another kind is the checker's own

    def contract(self) -> str:
        """The contract in one line, as a learner reads it before grading."""
        usage = " ".join((self.script, *self.args))
        answer = (
            f"one {self.finding}=... line on stdout per finding and exit 1, or {self.ok} alone and exit 0"
            if self.finding
            else "exit 0 when all is well and non-zero when it is not"
        )
        reads = [*(["the cluster"] if self.reads_cluster else []), *(["the files it is given"] * bool(self.file_args))]
        sources = [
            *(["the API server"] if self.reads_cluster else []),
            *(["containerd"] if self.reads_containerd else []),
        ]
        parts = [
            f"{usage}: {answer}",
            f"it only reads {listed(reads)}" if reads else "",
            f"when {listed(sources)} cannot be read it exits non-zero" + (f" without {self.ok}" if self.finding else "")
            if sources
            else "",
            "it decides from what it reads at each run (no answer kept between runs)",
            "a relative path works as an absolute one" if self.file_args else "",
        ]
        return "; ".join(part for part in parts if part) + "."


@dataclass(frozen=True)
class Case:
    """A state the step knows the answer to: how the sentence opens, the arguments and run options (``view``,
    ``dump``, ``dump_text``), and the findings it must print (none: OK).

    Example:: Case("Run on nvidia-gpu-operator", ("nvidia-gpu-operator",), {"view": view}, frozenset({"MISSING=a/b"}))
    """

    given: str
    args: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    expected: frozenset[str] = frozenset()
    hint: Callable[[set[str]], str | None] | None = None  # sees the findings printed; says the cause it diagnoses

    def run_options(self, checker: Checker, **changes: Any) -> dict[str, Any]:
        return {**({"cluster": True} if checker.reads_cluster else {}), **self.options, **changes}


@dataclass(frozen=True)
class Cases:
    """The step's two states: ``findings``, one with findings, and ``other``, one whose answer differs; and
    ``near_misses``, a state holding what the lab never makes but its rule must tell apart (the copy of the
    cluster with the lab's ``near_misses`` objects, ``near_miss_cluster``, or a generated input).

    Example:: Cases(script_runner.runs_of(learner.file(SCRIPT)), findings=gap, other=quiet, near_misses=near)
    """

    runs: ScriptRuns
    findings: Case
    other: Case
    near_misses: Case | None = None


Check = Callable[..., None]


def expect_answer(checker: Checker, result: ScriptResult, given: str, case: Case, hint: str | None = None) -> None:
    """The run gave the case's answer: its findings (or OK), or, for a checker that answers by its exit status,
    exit 0 for a case without findings and non-zero for one with."""
    __tracebackhide__ = True
    if checker.finding is not None:
        expect_verdict(
            result, checker.script, given, case.expected, prefix=checker.finding,
            hint=(lambda _: hint) if hint else case.hint, hint_first=bool(hint or case.hint), kinds=checker.kinds,
        )  # fmt: skip
        return
    right = result.exit_code == 0 if not case.expected else result.exit_code not in (0, None)
    expect(
        right and not result.timed_out and not result.flooded,
        f"{given}, {checker.script} {result.describe()}{said(result)}; it should "
        + ("exit 0." if not case.expected else "exit non-zero."),
        hint=hint,
        detail={"stdout": result.stdout, "stderr": result.stderr, "exit": result.exit_code},
    )


def _verdict(checker: Checker, cases: Cases, case: Case, given: str, **changes: Any) -> None:
    __tracebackhide__ = True
    run = cases.runs.run(*changes.pop("args", case.args), **case.run_options(checker, **changes))
    expect_answer(checker, run.result, given, case)


def fails_closed(checker: Checker, fault: str) -> Check:
    def check(checker_cases: Cases) -> None:
        __tracebackhide__ = True
        case = checker_cases.findings
        if fault == "without-containerd":
            args = tuple(a for n, a in enumerate(case.args) if n not in checker.file_args)
            options = case.run_options(checker, containerd=False)
            options.pop("dump", None), options.pop("dump_text", None)
            given = "With no containerd on PATH (no containerd command answers)"
        else:
            args, options, given = case.args, case.run_options(checker, api=fault), ""
            options.pop("view", None)
        result = checker_cases.runs.run(*args, **options).result
        expect_fails_closed(result, checker.script, fault, prefix=checker.finding or checker.ok, given=given)

    return check


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def only_reads(checker: Checker) -> Check:
    def check(checker_cases: Cases, tmp_path: Path) -> None:
        __tracebackhide__ = True
        for case in (checker_cases.findings, checker_cases.other):
            args, digests = list(case.args), dict[int, str]()
            for position in (n for n in checker.file_args if n < len(args)):  # a writable copy, so a write shows
                copy = tmp_path / f"{len(digests)}-{Path(args[position]).name}"
                shutil.copyfile(args[position], copy)
                copy.chmod(0o666)  # whichever uid the run is given may write it, so that a write shows
                digests[position], args[position] = _digest(copy), str(copy)
            options = case.run_options(checker, keeps=Keeps(writable_inputs=True)) if digests else {}
            run = checker_cases.runs.run(*args, **(options or case.run_options(checker)))
            changed = [case.args[n] for n, digest in digests.items() if _digest(Path(args[n])) != digest]
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
            given[" ".join(case.args) or "no argument"] = run.result
        missed = _right(checker, next(iter(given.values())), other)
        expect_uses_its_argument(
            checker.script, given, argument=f"its argument ({listed(checker.args)})", expected_differ=not missed
        )

    return check


STALE_HINT = (
    "Decide from what it reads at each run: an answer kept from an earlier run (a cache in /tmp or $HOME) goes "
    "stale when the cluster or containerd changes."
)


def _right(checker: Checker, result: ScriptResult, case: Case) -> bool:
    try:
        expect_answer(checker, result, "", case)
    except StepFailed:
        return False
    return True


def second_run(checker: Checker) -> Check:
    def check(checker_cases: Cases, tmp_path: Path) -> None:
        """The second answer is the one a first run in that state gives; where that one is right, it must be."""
        __tracebackhide__ = True
        first, then = checker_cases.other, checker_cases.findings
        runner, script, kept = checker_cases.runs.runner, checker_cases.runs.script, Keeps(state=tmp_path / "kept")
        runner.run(script, *first.args, **first.run_options(checker, keeps=kept))
        second = runner.run(script, *then.args, **then.run_options(checker, keeps=kept)).result
        given = (
            f"{then.given}, on its second run (its first, with the same $TMPDIR, /tmp and $HOME: "
            f"{first.given[0].lower()}{first.given[1:]})"
        )
        fresh = checker_cases.runs.run(*then.args, **then.run_options(checker)).result
        if _right(checker, fresh, then):
            expect_answer(checker, second, given, then, hint=STALE_HINT)
            return
        alike = (fresh.stdout.strip(), fresh.exit_code) == (second.stdout.strip(), second.exit_code)
        expect(
            alike,
            f"{given}, {checker.script} {second.describe()}{said(second)}, not what it answers on a first run in "
            "that state: it carries something over from the run before.",
            hint=STALE_HINT,
            detail={"first_run_stdout": fresh.stdout, "second_run_stdout": second.stdout},
        )

    return check


def relative_path(checker: Checker) -> Check:
    def check(checker_cases: Cases) -> None:
        """Both states, each file named relative to the working folder: a script that cannot read it there
        may still stumble on one state's answer, not on both."""
        __tracebackhide__ = True
        for case in (checker_cases.other, checker_cases.findings):
            args, inputs = list(case.args), []
            for position in (n for n in checker.file_args if n < len(args)):
                name = f"given/{Path(args[position]).name}"
                inputs.append((name, Path(args[position])))
                args[position] = name
            named = listed(name for name, _ in inputs)
            given = f"{case.given}, named by the relative path {named} from its working folder"
            _verdict(checker, checker_cases, case, given, args=tuple(args), keeps=Keeps(inputs=tuple(inputs)))

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
        _verdict(checker, checker_cases, case, case.given)

    return check


def waived(reason: str) -> Check:
    def check(feedback: Any) -> None:
        feedback.note(f"Not checked for this step: {reason}")

    return check


def contract_checks(checker: Checker) -> Iterator[tuple[str, Check]]:
    """Each check of ``checker``'s contract, named as the report shows it (``contract-second-run``)."""
    made: dict[str, Check] = {}
    if checker.reads_cluster:
        made |= {f"fails-closed-{fault}": fails_closed(checker, fault) for fault in sorted(FAILING_API)}
    if checker.reads_containerd:
        made["fails-closed-without-containerd"] = fails_closed(checker, "without-containerd")
    if checker.reads_cluster or checker.file_args:
        made["only-reads"] = only_reads(checker)
    if checker.args:
        made["uses-its-argument"] = uses_its_argument(checker)
    made["second-run"] = second_run(checker)
    if checker.file_args:
        made["relative-path"] = relative_path(checker)
    if checker.reads_cluster or checker.file_args:
        made["near-misses"] = near_misses(checker)
    for name, check in made.items():
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
