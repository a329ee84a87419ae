"""What a learner's checker script concluded: its ``PREFIX=...`` lines, ``OK``, and its exit status.

The labs' checkers share one contract: print one ``MISSING=``/``STALE=``/``BLOCKED=`` line per
finding and exit 1, or print ``OK`` and exit 0. :func:`expect_verdict` compares a run with the
findings the grader computed and says, in one sentence, what the script did instead;
:func:`expect_saved_verdict` does the same for a copy of its output the learner saved at a
moment of the lab. Lines that are neither (progress, a header) are ignored; findings are
compared as a set, each printed once. Usable without pytest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...labs.nearmisses import NearMiss, near_misses_in
from ...sandbox.script_result import ScriptResult, said
from ..feedback import HEADLINE_WORDS, expect, listed, missing_and_extra
from .diagnose import answered, diagnosis

if TYPE_CHECKING:
    from ..learner import LearnerFile

REPEATED = "the script's first run that was stopped by force (timeout or limit), given again without running it"
MOST = 3  # findings named in a sentence; the rest counted ("and 4 more"), every one in the check's detail


@dataclass(frozen=True)
class Verdict:
    findings: tuple[str, ...]  # the PREFIX= lines as printed (key upper-cased), in order
    ok: bool
    exit_code: int | None

    def repeated(self) -> list[str]:
        return sorted(line for line, count in Counter(self.findings).items() if count > 1)


def findings_in(text: str, prefix: str) -> tuple[str, ...]:
    r"""The ``PREFIX=...`` lines of a script's output or a saved copy of it, in order (key upper-cased).

    Example:: findings_in("checking\nmissing=nvidia\n", "MISSING")  # ("MISSING=nvidia",)
    """
    marker = f"{prefix.upper()}="
    lines = (line.strip() for line in text.splitlines())
    return tuple(marker + line[len(marker) :].strip() for line in lines if line.upper().startswith(marker))


def says_ok(text: str) -> bool:
    """Whether a line of the text is ``OK`` alone (any case).

    Example:: says_ok(learner.file("out/coverage.txt").text())
    """
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
    hint_first: bool = False,
    kinds: tuple[str, ...] = (),
    may_add: Iterable[str] = (),
) -> Verdict:
    """``expected`` findings and exit 1, or (none expected) ``OK`` and exit 0. ``given`` opens the sentence
    ("Run on nvidia-gpu-operator"); ``hint`` sees the findings printed, for a known wrong one. A known shape
    of wrong output (one finding of several) says more than ``hint``, unless ``hint_first`` (it knows why).
    With ``kinds`` (the lab asks for "at least" these reasons: ``("mcp/", "node/")``), findings of those kinds
    must be exactly the expected ones, and a finding of another kind is the checker's own addition: it blocks
    (exit 1, no OK) and is not held against it. So is a finding in ``may_add``: one of those kinds on an object
    that is in fact unhealthy in a way the lab did not ask about (a Degraded pool), which an "at least" checker
    may report.

    Example:: expect_verdict(run.result, "bin/ds-coverage.sh", "Run on research", set(), prefix="MISSING")
    """
    __tracebackhide__ = True
    verdict = verdict_of(result, prefix)
    wanted, printed = set(expected), set(verdict.findings)
    others = {line for line in printed if kinds and not line.partition("=")[2].startswith(kinds)}
    others |= (printed & set(may_add)) - wanted
    printed -= others
    facts = {
        **({"not run": REPEATED} if result.repeated else {}),  # first: a long detail is cut at its end
        **(detail or {}),
        "expected": sorted(wanted),
        "stdout": result.stdout,
        "stderr": result.stderr,
        "exit": result.exit_code,
    }
    expect_read_only(result, script, given)
    did = _what_it_did(result, script, given, verdict, prefix)
    if wanted or others:
        right = printed == wanted and not verdict.repeated() and result.exit_code == 1 and not verdict.ok
    else:
        right = verdict.ok and not printed and result.exit_code == 0
    expect(
        not (verdict.findings and verdict.ok),
        f"{did}, and OK too: a verdict that contradicts itself. Print OK only when there is no {prefix}= line.",
        detail=facts,
    )
    on_stderr = set(findings_in(result.stderr, prefix))
    should = (
        "they are the findings it should print, on stdout, where a checker's answer goes"
        if wanted and not verdict.findings and on_stderr == wanted
        else _should(wanted, printed, others, prefix, kinds)
    )
    if len(f"{did}; {should}.".split()) > HEADLINE_WORDS:  # the script's own words stay in the detail
        did = _what_it_did(result, script, given, verdict, prefix, quote=False)
    expect(
        right,
        f"{did}; {should}.",
        hint=_cause(result, wanted, printed, prefix, hint, hint_first),
        detail=facts,
    )
    return verdict


def _should(wanted: set[str], printed: set[str], others: set[str], prefix: str, kinds: tuple[str, ...]) -> str:
    """What it should have printed: the findings named where it printed none, else what its output lacks and has
    too (at most :data:`MOST` of each named; the check's detail has them all)."""
    if not wanted and not others:
        return "it should print OK and exit 0" + (
            f": its output {missing_and_extra(wanted, printed, MOST)}" if printed else ""
        )
    if not wanted:
        return f"with no {listed(kinds)} finding, its own findings ({listed(sorted(others), most=MOST)}) still block: exit 1"
    each = ", each once," if len(wanted) > 1 else ""
    if not printed:
        return f"it should print {listed(sorted(wanted), most=MOST)}{each} and exit 1, without OK"
    differs = missing_and_extra(wanted, printed, MOST)
    return "it should print each finding once and exit 1, without OK" + (f": its output {differs}" if differs else "")


def _cause(
    result: ScriptResult, wanted: set[str], printed: set[str], prefix: str,
    hint: Callable[[set[str]], str | None] | None, hint_first: bool,
) -> str | None:  # fmt: skip
    """The hint: a cause the run shows (:mod:`.diagnose`); else, for a run that answered, the step's own diagnosis
    of what it printed, or the shape of its output; else none."""
    if diagnosed := diagnosis(result, wanted, printed):
        return diagnosed
    if not answered(result):
        return None
    own, shape = hint(printed) if hint else None, _shape_hint(printed, wanted, prefix)
    return (own or shape) if hint_first else (shape or own)


def _shape_hint(printed: set[str], wanted: set[str], prefix: str) -> str | None:
    """What a known shape of wrong output says of the script: several findings on one line."""
    if len(wanted) > 1 and any("," in line or " " in line.partition("=")[2].strip() for line in printed):
        return f"Print one {prefix}= line per finding, not several findings on one line."
    return None


def _what_it_did(
    result: ScriptResult, script: str, given: str, verdict: Verdict, prefix: str, *, quote: bool = True
) -> str:
    """ "Run on ns, bin/x.sh exited 0 and printed OK": findings it printed on stderr named as such."""
    on_stderr = findings_in(result.stderr, prefix)
    if on_stderr and not verdict.findings:
        shown = f"its {len(on_stderr)} {prefix}= lines on stderr, none on stdout"
    elif verdict.ok and not verdict.findings:
        shown = "OK"
    elif len(verdict.findings) > MOST:
        shown = f"{len(verdict.findings)} {prefix}= lines"
    else:
        shown = listed(verdict.findings) or f"no {prefix}= line and no OK"
    quoted = said(result) if quote and not on_stderr else ""
    return f"{given}, {script} {result.describe()}{quoted} and printed {shown}"


def expect_saved_verdict(
    file: LearnerFile,
    expected: Iterable[str],
    *,
    prefix: str,
    why: str,
    hint: Callable[[Verdict], str | None] | None = None,
    detail: Any = None,
    kinds: tuple[str, ...] = (),
) -> Verdict:
    """A checker's output the learner saved at a moment of the lab: exactly the ``expected`` findings and no
    ``OK``, or (none expected) ``OK``. ``why`` says what that moment found; ``hint`` sees what was saved.
    ``kinds`` as for :func:`expect_verdict`: findings of another kind are the checker's own, and pass.

    Example:: expect_saved_verdict(learner.file("out/preflight.txt"), {"BLOCKED=mcp/worker"}, prefix="BLOCKED", why="what the gate finds at step 7")
    """
    __tracebackhide__ = True
    text = file.text()
    saved = Verdict(findings_in(text, prefix), says_ok(text), None)
    wanted, found = set(expected), set(saved.findings)
    found -= {line for line in found if kinds and not line.partition("=")[2].startswith(kinds)}
    should = f"exactly {listed(sorted(wanted))}, without OK" if wanted else "OK"
    if found and saved.ok:
        held = f"{listed(sorted(found))} and OK too, a verdict that contradicts itself"
    else:
        held = "OK alone" if saved.ok else listed(sorted(found)) or f"no {prefix}= line and no OK"
    expect(
        found == wanted and saved.ok is not bool(wanted),
        f"{file} should hold {should}, {why}; it holds {held}.",
        hint=hint(saved) if hint else None,
        detail={**(detail or {}), "expected": sorted(wanted), "saved": text},
    )
    return saved


def expect_read_only(result: ScriptResult, script: str, given: str) -> None:
    """A checker reads the cluster and never changes it: every change it asked of the view (refused) fails it.

    Example:: expect_read_only(run.result, "bin/preflight.sh", "Run on the cluster as it is now")
    """
    __tracebackhide__ = True
    tried = listed(dict.fromkeys(f"{method} {path.split('?')[0]}" for method, path in result.writes), most=2)
    expect(
        not result.writes,
        f"{given}, {script} tried to change the cluster ({tried}); a checker only reads: report what you "
        "find and leave acting on it to a person.",
        detail={"writes": [list(write) for write in result.writes]},
    )


FAILING_API = {
    "unavailable": "With the API server answering 503 Service Unavailable to every request",
    "unreachable": "With the API server unreachable (every connection refused)",
}
"""How the API server can fail for a run (``Run(..., cluster=True, api=fault)``), as a sentence opens.

Example:: Run("nvidia-gpu-operator", cluster=True, api="unavailable")  # one of FAILING_API
"""


FAIL_CLOSED_ADVICE = {
    "unavailable": "When kubectl fails, say so on stderr and exit non-zero: test its exit status (in a pipe or a "
    "$(...) it is lost unless you keep it), and do not take an empty answer for a healthy one.",
    "without-containerd": "When `containerd config dump` cannot run or fails, say so on stderr and exit non-zero: "
    "an empty dump is no proof that the runtime is loaded.",
}
FAIL_CLOSED_ADVICE["unreachable"] = FAIL_CLOSED_ADVICE["unavailable"]


def expect_fails_closed(result: ScriptResult, script: str, fault: str, *, prefix: str, given: str = "") -> None:
    """A checker that cannot read what it checks must not report success: no ``OK``, and a non-zero exit.
    ``fault`` names how the API server failed (a key of ``FAILING_API``), or ``given`` opens the sentence.

    Example:: expect_fails_closed(run.result, "bin/preflight.sh", "unavailable", prefix="BLOCKED")
    """
    __tracebackhide__ = True
    verdict = verdict_of(result, prefix)
    success = verdict.ok or result.exit_code == 0
    printed = "printed OK" if verdict.ok else f"printed {listed(verdict.findings) or 'nothing'}"
    expect(
        not success,
        f"{given or FAILING_API[fault]}, {script} {result.describe()}{said(result)} and {printed}: it reports success "
        "on what it could not read.",
        hint=FAIL_CLOSED_ADVICE.get(fault, FAIL_CLOSED_ADVICE["unavailable"]),
        detail={"fault": fault, "stdout": result.stdout, "stderr": result.stderr, "exit": result.exit_code},
    )


def expect_uses_its_argument(
    script: str, runs: dict[str, ScriptResult], *, expected_differ: bool = True, argument: str = "its argument"
) -> None:
    """Runs given different arguments, whose right outputs differ, must not all print the same: a script
    that does ignores its argument. ``runs`` maps how each run was given its argument to its result.

    Example:: expect_uses_its_argument("bin/ds-coverage.sh", {"nvidia-gpu-operator": a.result, "research": b.result})
    """
    __tracebackhide__ = True
    outputs = {(result.stdout.strip(), result.exit_code) for result in runs.values()}
    expect(
        not expected_differ or len(runs) < 2 or len(outputs) > 1,
        f"{script} printed the same and exited the same for {listed(runs)}, whose answers differ: "
        f"it ignores {argument}. Use the argument it is given, not a value written in the script.",
        detail={given: result.stdout for given, result in runs.items()},
    )


def near_miss_hint(paths: Iterable[Path], expected: Iterable[str]) -> Callable[[set[str]], str | None]:
    """For a near-miss case: which near miss a wrong finding concerns, in its author's words (the comment above it
    in the lab's near-miss file), so the learner learns what their rule did not tell apart.

    Example:: Case(given, args, {"view": view}, expected, hint=scripts.near_miss_hint(lab.near_misses, expected))
    """
    misses, wanted = near_misses_in(paths), set(expected)

    def hint(printed: set[str]) -> str | None:
        if not printed and wanted:  # it found nothing at all: no near miss is what it got wrong
            return None
        named = [miss for miss in misses if any(_concerns(miss, line) for line in printed ^ wanted)]
        return " ".join(f"{miss.name} is a near miss: {miss.note}." for miss in named[:2]) or None

    return hint


def _concerns(miss: NearMiss, finding: str) -> bool:
    """Whether a finding names the near miss, or (a Pod) names its node and a name its own begins with."""
    if re.search(rf"[/=]{re.escape(miss.name)}(/|$)", finding):
        return True
    node = ((miss.obj.get("spec") or {}).get("nodeName")) if miss.kind == "Pod" else None
    owner, _, where = finding.partition("=")[2].rpartition("/")
    return bool(node) and where == node and bool(owner) and miss.name.startswith(owner)
