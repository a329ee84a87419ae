"""One check's evidence as a learner reads it: ``gpulab explain REPORT CHECK`` in the terminal, and the cohort page's
page of a learner's row. Only what the learner may see: the check's outcome, sentence and hint, and its evidence
(the instructor's detail, which holds the run's seed, never).
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from typing import Any


def find_check(report: Mapping[str, Any], wanted: str) -> dict[str, Any] | None:
    """The check ``wanted`` names: its id (``gpunode.4.finds-pods-that-are-gone``), the id without the lab
    (``4.finds-pods-that-are-gone``), or its name when one check has it."""
    checks = [check for step in report.get("steps") or [] for check in step.get("checks") or []]
    for matches in (
        lambda c: c.get("id") == wanted,
        lambda c: str(c.get("id", "")).split(".", 1)[-1] == wanted,
        lambda c: c.get("name") == wanted,
    ):
        found = [check for check in checks if matches(check)]
        if len(found) == 1:
            return found[0]
    return None


def _who(obj: Mapping[str, Any]) -> str:
    if not isinstance(obj, Mapping):
        return str(obj)
    where = f"{obj.get('namespace')}/" if obj.get("namespace") else ""
    version = f" (resourceVersion {obj['resourceVersion']})" if obj.get("resourceVersion") else ""
    missing = ": not found" if obj.get("found") is False else ""
    return f"{obj.get('kind')} {where}{obj.get('name')}{version}{missing}"


def _file(entry: Mapping[str, Any]) -> Iterator[str]:
    if entry.get("exists") is False:
        yield f"file {entry['file']}: not there"
        return
    count = entry.get("line_count")
    yield f"file {entry['file']}" + (f" ({count} lines)" if count is not None else "")
    yield from (f"    {line}" for line in entry.get("lines") or [])
    if entry.get("cut"):
        yield "    ...(cut)"


def _given(run: Mapping[str, Any]) -> list[str]:
    """What a run was given, in words."""
    said = {
        "dump": lambda value: f"the containerd dump {value}",
        "generated_dump": lambda value: "a containerd dump the grader generated",
        "cluster": lambda value: "the cluster" if value else "no cluster",
        "containerd": lambda value: "no containerd" if value is False else "containerd",
        "view": lambda value: f"a view of the cluster ({value})",
        "tainted": lambda value: f"nodes shown tainted: {', '.join(map(str, value))}",
        "near_misses": lambda value: "the near-miss copy, with " + ", ".join(_who(obj) for obj in value),
        "files": lambda value: f"the files {', '.join(value)}",
        "api": lambda value: f"an API server that is {value}",
        "kept": lambda value: (
            "a kept state (its $TMPDIR, /tmp and $HOME)" if value.get("state") else "files in its folder"
        ),
    }
    return [
        said[key](value) if key in said else f"{key}={value}"
        for key, value in run.items()
        if key not in ("script", "args")
    ]


def _run(entry: Mapping[str, Any]) -> Iterator[str]:
    run = entry.get("run") or {}
    given = _given(run)
    ended = entry.get("ended") or f"exit {entry.get('exit')}"
    yield f"run {' '.join([str(run.get('script')), *map(str, run.get('args') or [])])}: {ended} in {entry.get('duration')} s"
    if given:
        yield f"    given: {', '.join(given)}"
    for line in (run.get("generated_dump") or {}).get("lines") or []:
        yield f"    dump {line}"
    for name, head in (run.get("files") or {}).items():
        yield from (f"    {name} {line}" for line in (head or {}).get("lines") or [])
        yield from (f"    {name} defines {table}" for table in (head or {}).get("runtime_tables") or [])
    for stream in ("stdout", "stderr"):
        text = str(entry.get(stream) or "")
        lines = text.splitlines()[:8]
        yield from (f"    {stream}: {line}" for line in lines)
        if entry.get(f"{stream}_cut") or len(text.splitlines()) > 8:
            yield f"    {stream}: ...(cut)"


def entry_lines(entry: Mapping[str, Any]) -> Iterator[str]:
    """One evidence entry as lines of text."""
    if "file" in entry:
        yield from _file(entry)
    elif "object" in entry:
        yield _who(entry["object"])
        yield from (f"    {name} = {value}" for name, value in (entry.get("fields") or {}).items())
    elif "list" in entry:
        asked = entry["list"]
        where = f" in {asked['namespace']}" if asked.get("namespace") else ""
        selectors = [f"{key} {value}" for key, value in asked.items() if key not in ("kind", "namespace")]
        yield f"list {asked.get('kind')}{where}{' (' + ', '.join(selectors) + ')' if selectors else ''}: {entry.get('count')} found"
    elif "run" in entry:
        yield from _run(entry)
    elif "cut" in entry:
        yield f"...{entry['cut']}"


def explain_lines(check: Mapping[str, Any]) -> list[str]:
    """The check's outcome, its sentence and hint, then what it read."""
    lines = [f"{check.get('id')}: {check.get('outcome')}"]
    lines += [f"  {text}" for text in (check.get("message"), check.get("hint")) if text]
    lines.append("What the grader read:" if check.get("evidence") else "The grader recorded nothing it read.")
    lines += [f"  {line}" for entry in check.get("evidence") or [] for line in entry_lines(entry)]
    return lines


def explain_html(report: Mapping[str, Any], learner: str) -> str:
    """A learner's page: every check's evidence, as :func:`explain_lines` gives it."""
    parts = [f"<h1>{html.escape(learner)}: {html.escape(str(report.get('lab')))}</h1>"]
    for step in report.get("steps") or []:
        parts.append(f"<h2>Step {step.get('number')}: {html.escape(str(step.get('title')))}</h2>")
        for check in step.get("checks") or []:
            text = "\n".join(explain_lines(check))
            parts.append(f'<pre id="{html.escape(str(check.get("id")))}">{html.escape(text)}</pre>')
    title = f"<title>{html.escape(learner)}: what each check read</title>"
    return f"<!doctype html><meta charset=utf-8>{title}\n" + "\n".join(parts) + "\n"
