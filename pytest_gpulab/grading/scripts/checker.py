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
- ``contract-second-run``: the same command line run twice in one kept
  $TMPDIR, /tmp and $HOME, the state changed between (``Cases.changed``): its second answer follows it;
- ``contract-relative-path`` (``file_args``): the same answer for a file named relative to a working
  directory that is not its own;
- ``contract-near-misses`` (``reads_cluster`` or ``file_args``): the right answer on a state holding what the
  lab never makes but its rule must tell apart (``Cases.near_misses``).

An author leaves one out only by naming it with a reason (``waive={"second-run": "why"}``), which the
report shows. :meth:`Checker.contract` is the one-line contract ``gpulab labs LAB`` shows. Usable
without pytest: :func:`pytest_gpulab.grading.scripts.contract.contract_checks` returns the checks as plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...sandbox.script_result import ScriptResult, said
from ..feedback import expect, listed
from .diagnose import exit_diagnosis
from .verdicts import expect_verdict

if TYPE_CHECKING:
    from .runs import ScriptRuns

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
    may_add: frozenset[str] = frozenset()  # findings an "at least" checker may add: objects in fact unhealthy

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
    changed: Case | None = None  # ``findings``' arguments in another state, for the second run (default: ``other``)


Check = Callable[..., None]


def expect_answer(checker: Checker, result: ScriptResult, given: str, case: Case, hint: str | None = None) -> None:
    """The run gave the case's answer: its findings (or OK), or, for a checker that answers by its exit status,
    exit 0 for a case without findings and non-zero for one with."""
    __tracebackhide__ = True
    if checker.finding is not None:
        expect_verdict(
            result, checker.script, given, case.expected, prefix=checker.finding,
            hint=(lambda _: hint) if hint else case.hint, hint_first=bool(hint or case.hint), kinds=checker.kinds,
            may_add=case.may_add,
        )  # fmt: skip
        return
    right = result.exit_code == 0 if not case.expected else result.exit_code not in (0, None)
    expect(
        right and not result.timed_out and not result.flooded,
        f"{given}, {checker.script} {result.describe()}{said(result)}; it should "
        + ("exit 0." if not case.expected else "exit non-zero."),
        hint=exit_diagnosis(result, should_succeed=not case.expected) or hint,
        detail={"stdout": result.stdout, "stderr": result.stderr, "exit": result.exit_code},
    )
