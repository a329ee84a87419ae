"""What a learner's checker script concluded: its ``PREFIX=...`` lines, ``OK``, and its exit status.

The labs' checkers share one contract: print one ``MISSING=``/``STALE=``/``BLOCKED=`` line per
finding and exit 1, or print ``OK`` and exit 0. :func:`expect_verdict` compares a run with the
findings the grader computed and says, in one sentence, what the script did instead. Lines
that are neither (progress, a header) are ignored; findings are compared as a set, each
printed once. Usable without pytest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .answers import missing_and_extra
from .feedback import expect, listed
from .runner import ScriptResult
from .scripts import said


@dataclass(frozen=True)
class Verdict:
    findings: tuple[str, ...]  # the PREFIX= lines as printed (key upper-cased), in order
    ok: bool
    exit_code: int | None

    def repeated(self) -> list[str]:
        return sorted(line for line, count in Counter(self.findings).items() if count > 1)


def findings_in(text: str, prefix: str) -> tuple[str, ...]:
    """The ``PREFIX=...`` lines of a script's output or a saved copy of it, in order (key upper-cased)."""
    marker = f"{prefix.upper()}="
    lines = (line.strip() for line in text.splitlines())
    return tuple(marker + line[len(marker) :].strip() for line in lines if line.upper().startswith(marker))


def says_ok(text: str) -> bool:
    return any(line.strip().upper() == "OK" for line in text.splitlines())


def verdict_of(result: ScriptResult, prefix: str) -> Verdict:
    return Verdict(findings_in(result.stdout, prefix), says_ok(result.stdout), result.exit_code)


def expect_verdict(
    result: ScriptResult,
    script: str,
    given: str,
    expected: Iterable[str],
    *,
    prefix: str,
    hint: Callable[[set[str]], str | None] | None = None,
    detail: Any = None,
) -> Verdict:
    """``expected`` findings and exit 1, or (none expected) ``OK`` and exit 0. ``given`` opens the sentence
    ("Run on nvidia-gpu-operator"); ``hint`` sees the findings printed, for a known wrong one."""
    __tracebackhide__ = True
    verdict = verdict_of(result, prefix)
    wanted, printed = set(expected), set(verdict.findings)
    facts = {
        **(detail or {}),
        "expected": sorted(wanted),
        "stdout": result.stdout,
        "stderr": result.stderr,
        "exit": result.exit_code,
    }
    did = f"{given}, {script} {result.describe()}{said(result)} and printed {listed(verdict.findings) or f'no {prefix}= line'}"
    if wanted:
        should = f"it should print {listed(sorted(wanted))}, each once, and exit 1"
        right = printed == wanted and not verdict.repeated() and result.exit_code == 1
    else:
        should = "it should print OK and exit 0"
        right = verdict.ok and not printed and result.exit_code == 0
    differs = missing_and_extra(wanted, printed)
    expect(
        right,
        f"{did}; {should}" + (f" (its output {differs})." if differs else "."),
        hint=hint(printed) if hint else None,
        detail=facts,
    )
    return verdict
