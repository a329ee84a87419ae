"""Why a learner's checker answered wrong, read from what its run shows: a cause the grader diagnosed, in the
lab's words, or None. Only a diagnosed cause becomes a hint (no check has a default one):

- the shell could not read the script: bash syntax under ``#!/bin/sh`` (dash), or a syntax error bash names;
- it ended early without a word: under ``set -e`` a command that fails ends the script silently;
- it printed only the first of its findings, and its text shows why: an exit right after the first, or the first
  item of a list (``[0]``);
- its findings on stderr, none on stdout;
- the right findings with the wrong exit status;
- it ran out of time, or was killed by a signal.

Usable without pytest: :func:`diagnosis`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable

from ...sandbox.script_result import ScriptResult

TEXT_LIMIT = 64 * 1024
DASH_SAYS = re.compile(r"Syntax error|\[\[: not found|Bad substitution|\(\(: not found|: not found\s*$", re.M)
BASH_SAYS = re.compile(r"line (\d+): syntax error[^\n]*", re.M)
SET_E = re.compile(r"^\s*set\s+-[a-z]*e|^\s*set\s+-o\s+errexit|^#!.*\s-[a-z]*e\b", re.M)
SILENT_FAILERS = (
    (re.compile(r"grep\s+(-\w*c|--count)"), "grep -c that counts 0 exits 1 (add || true after it)"),
    (re.compile(r"\(\(\s*\w+\s*\+\+\s*\)\)"), "((n++)) when n is 0 returns 1 (count with n=$((n + 1)))"),
    (re.compile(r"\blet\s+\w+\+\+"), "let n++ when n is 0 returns 1 (count with n=$((n + 1)))"),
)


def script_text(result: ScriptResult) -> str:
    """The text of the script the run ran (its path is in the command), or "" when it cannot be read."""
    try:
        path = result.command[1] if result.ran_with_bash and len(result.command) > 1 else result.command[0]
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # never a link to the grader's files
    except (OSError, IndexError):
        return ""
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return ""
        return handle.read(TEXT_LIMIT).decode("utf-8", "replace")


def interpreter(text: str) -> str | None:
    first = text.splitlines()[0] if text else ""
    return first[2:].strip() if first.startswith("#!") else None


def _syntax(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    runs_under = interpreter(text) or ""
    if not result.ran_with_bash and re.search(r"(^|/)(sh|dash)(\s|$)", runs_under) and DASH_SAYS.search(result.stderr):
        return (
            f"Its #! line runs {runs_under.split()[0]}, which is dash on this machine, and dash does not know bash "
            "syntax ([[ ]], arrays, (( )), <<<, ${var//x/y}): each such line failed. Start it with #!/usr/bin/env bash."
        )
    if found := BASH_SAYS.search(result.stderr):
        return f"bash could not read it: {found.group(0).strip()}. Fix that line; nothing after it ran as written."
    return None


def _silent_exit(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    if result.exit_code in (0, None) or result.stderr.strip() or not printed < wanted or "OK" in result.stdout.split():
        return None  # only fewer findings than there are, ended non-zero without a word
    if not SET_E.search(text):
        return None
    suspects = [why for pattern, why in SILENT_FAILERS if pattern.search(text)]
    if not suspects:
        return None
    return (
        f"It ended with exit {result.exit_code} and no error message before printing all its findings: under set -e "
        f"a command that fails ends the script silently, and here {' and '.join(suspects)}."
    )


def _first_only(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    if not (len(printed) == 1 < len(wanted) and printed < wanted):
        return None
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if re.search(r"\[0\]", line) and re.search(r"echo|print|items|jsonpath|\$\{", line):
            found = re.search(r"\S{0,30}\[0\]\S{0,20}", line)
            shown = found.group(0) if found else "[0]"
            return f"It reads only the first item of a list (line {number + 1}: {shown}): go through all."
        indent = len(line) - len(line.lstrip())
        if indent and re.search(r"(echo|print|printf)\b.*=", line):  # a finding printed inside a block
            after = " ".join(x for x in lines[number + 1 : number + 3] if len(x) - len(x.lstrip()) >= indent)
            if re.search(r"\b(sys\.)?exit\b|\bbreak\b|\breturn\b", after):
                return (
                    f"It stops after its first finding (line {number + 1} prints it and the next line ends the loop): "
                    "report every one, then exit 1."
                )
    return None


def _on_stderr(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    prefix = next(iter(wanted), "").partition("=")[0]
    if not prefix or printed or f"{prefix}=" not in result.stderr:
        return None
    return (
        f"Its {prefix}= lines went to stderr (echo ... >&2, or a logger), where a checker's answer is not read: "
        "print findings on stdout, and keep stderr for errors."
    )


def _exit_status(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    if result.timed_out or result.exit_code is None:
        return None
    if wanted and printed == wanted and result.exit_code != 1:
        return f"Its findings are right, but it exited {result.exit_code}: a checker that finds a problem exits 1."
    if not wanted and not printed and result.exit_code not in (0,) and "OK" in result.stdout.upper().split():
        return f"It printed OK but exited {result.exit_code}: with nothing found it exits 0."
    return None


def _ended_by_force(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    if result.timed_out:
        return (
            f"It ran past its {result.timeout:g} s and was stopped: something in it waits for ever (a kubectl with "
            "-w or --watch, a read from standard input, a loop whose condition never changes)."
        )
    if result.signal is not None:
        return f"It was killed by {result.signal_name} before it finished, so its answer is incomplete."
    if result.limit is not None:
        return (
            f"It {result.limit} and was stopped: a checker reads and prints a little, so look for a loop that starts "
            "processes or keeps data without end."
        )
    return None


LITERAL_TEST = re.compile(r"(?:\[\[?|\btest)\s+-[nz]\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:\]\]?|;|&&|\|\||$)")


def _literal_test(result: ScriptResult, text: str, wanted: set[str], printed: set[str]) -> str | None:
    """A test of a word, not of a variable's value: ``[ -n found ]`` is always true, ``[ -z found ]`` never."""
    for number, line in enumerate(text.splitlines()):
        code = re.sub(r"(^|\s)#.*$", "", line)
        if found := LITERAL_TEST.search(code):
            word = found.group(1)
            return (
                f"Line {number + 1} tests the word {word} itself ({found.group(0).strip()}), which is never empty, "
                f'so the test has one answer whatever was found: test the variable, "${word}".'
            )
    return None


DIAGNOSES: tuple[Callable[[ScriptResult, str, set[str], set[str]], str | None], ...] = (
    _ended_by_force, _syntax, _on_stderr, _silent_exit, _first_only, _exit_status, _literal_test,
)  # fmt: skip


def diagnosis(result: ScriptResult, wanted: set[str], printed: set[str]) -> str | None:
    """The cause the run shows for a wrong answer, or None when none is diagnosed.

    Example:: diagnosis(run.result, {"MISSING=a/b", "MISSING=c/d"}, {"MISSING=a/b"})
    """
    text = script_text(result)
    for diagnose in DIAGNOSES:
        if found := diagnose(result, text, wanted, printed):
            return found
    return None


def exit_diagnosis(result: ScriptResult, *, should_succeed: bool) -> str | None:
    """For a checker that answers by its exit status alone: the cause its run shows for exiting the wrong way, or
    None. A silent non-zero exit where it should exit 0 under ``set -e`` is one of the commands that end it.

    Example:: expect(result.exit_code == 0, sentence, hint=exit_diagnosis(result, should_succeed=True))
    """
    text = script_text(result)
    for diagnose in (_ended_by_force, _syntax, _literal_test):
        if found := diagnose(result, text, set(), set()):
            return found
    if should_succeed and result.exit_code not in (0, None) and not result.stderr.strip() and SET_E.search(text):
        suspects = [why for pattern, why in SILENT_FAILERS if pattern.search(text)]
        if suspects:
            return (
                f"It exited {result.exit_code} without a word: under set -e a command that fails ends the script "
                f"silently, and here {' and '.join(suspects)}."
            )
    return None


POSITIONAL = re.compile(r"\$(?:[1-9@*#]|\{(?:[1-9@*]|#\}))|\bgetopts\b|\bshift\b|sys\.argv")


def reads_its_arguments(result: ScriptResult) -> bool:
    """Whether the script's text reads its positional parameters: one that gives one answer for two arguments
    then reads them wrongly (minutes for seconds), which the wrong answer's own check names, not ignores them."""
    code = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in script_text(result).splitlines())
    return bool(POSITIONAL.search(code))


def answered(result: ScriptResult) -> bool:
    """Whether the run ended by itself with a checker's answer (exit 0 or 1), so a wrong one is about what it read."""
    return not (result.timed_out or result.flooded or result.start_error) and result.exit_code in (0, 1)
