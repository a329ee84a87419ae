"""A learner script's run as evidence (:mod:`..evidence`): its arguments, what it was given (a shipped or generated
dump, a view of the cluster, the near-miss copy, a failing API server, a kept state), its exit status, its
duration and the head of its output, with the grader's own paths named by their file only. Usable without pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...sandbox.script_result import GRADER_PATH, LAB_PATH
from .. import evidence
from ..learner import LearnerFile
from .keeps import Keeps

if TYPE_CHECKING:
    from ...sandbox.clusterview import DoctoredView
    from .runs import LearnerRun


def plain(text: str) -> str:
    """``text`` with a path into the lab shown as the lab names it, and a file the grader made by its name."""
    return GRADER_PATH.sub(r"\1", LAB_PATH.sub(r"\1", text))


def script_name(script: Path | LearnerFile) -> str:
    return str(script) if isinstance(script, LearnerFile) else plain(str(script)).rsplit("/", 1)[-1]


def _view(view: DoctoredView) -> dict[str, Any]:
    """A view as evidence: what it hides is counted, never named (a random choice the learner must not learn)."""
    hidden = len(view.doctor.hidden)
    shown: dict[str, Any] = {"view": "read-only" + (f", {hidden} Pods hidden" if hidden else "")}
    if view.doctor.taints:
        shown["tainted"] = sorted(view.doctor.taints)
    copy = evidence.copy_at(str(view.upstream.port))
    if copy is not None:
        shown["near_misses"] = copy
    return shown


def given(
    script: Path | LearnerFile, args: tuple[str, ...], options: dict[str, Any], view: DoctoredView | None
) -> dict[str, Any]:
    """What a run was given, as its evidence says it."""
    shown: dict[str, Any] = {"script": script_name(script), "args": [plain(arg) for arg in args]}
    if options.get("dump"):
        shown["dump"] = options["dump"]
    if options.get("dump_text"):
        shown["generated_dump"] = evidence.quoted_lines(options["dump_text"])
    if options.get("cluster"):
        shown["cluster"] = True
    if not options.get("containerd", True):
        shown["containerd"] = False
    if options.get("api"):
        shown["api"] = options["api"]
    keeps = options.get("keeps")
    if isinstance(keeps, Keeps) and (keeps.state or keeps.inputs):
        shown["kept"] = {"state": keeps.state is not None, "inputs": [name for name, _ in keeps.inputs]}
    if view is not None:
        shown.update(_view(view))
    return shown


def note_run(run: LearnerRun) -> None:
    """The run, once, in the current check's evidence."""
    current = evidence.EVIDENCE.get()
    if current is None or not run.given:
        return
    result = run.result
    entry: dict[str, Any] = {"run": run.given, "exit": result.exit_code, "duration": round(result.duration, 3)}
    if result.exit_code is None:
        entry["ended"] = result.describe()
    for stream in ("stdout", "stderr"):
        text, cut = evidence.head(plain(getattr(result, stream)), evidence.OUTPUT_CHARS)
        entry[stream] = text
        if cut or getattr(result, f"{stream}_truncated"):
            entry[f"{stream}_cut"] = True
    current.add(("run", id(result)), entry)
