"""A learner script's run as evidence (:mod:`..evidence`): its arguments, what it was given (a shipped or generated
dump, a view of the cluster, the near-miss copy, a failing API server, a kept state), its exit status, its
duration and the head of its output, with the grader's own paths named by their file only. Usable without pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...sandbox.script_result import GRADER_PATH, LAB_PATH, ScriptResult
from .. import evidence, quoting
from ..learner import LearnerFile
from .keeps import Keeps

if TYPE_CHECKING:
    from ...sandbox.clusterview import DoctoredView
    from .runs import LearnerRun


COPY_PORT = "_copy_port"
GIVEN_FILES = 4  # files a run's evidence quotes the head of
RUNTIME_TABLE = re.compile(r"^\s*\[.*\.runtimes\.[^.\]]+\]\s*$")  # [plugins."...".containerd.runtimes.NAME]


def plain(text: str, root: Path | None = None, work: Path | None = None) -> str:
    """``text`` with a path under the lab ``root`` relative to it, and a file the grader made (under its ``work``
    folder, or a temporary folder of its own) by its name."""
    if root is not None and str(root).strip("/"):
        text = text.replace(str(root).rstrip("/") + "/", "")
    if work is not None and str(work).strip("/"):
        text = re.sub(re.escape(str(work).rstrip("/")) + r"(?:/[^\s:'\"]*)?/([^/\s:'\"]+)", r"\1", text)
    return GRADER_PATH.sub(r"\1", LAB_PATH.sub(r"\1", text))


def _argument(arg: str, root: Path | None, work: Path) -> str:
    """An argument as the learner may read it: a path under the lab root relative to it, another path by its name."""
    if not arg.startswith("/"):
        return plain(arg, root, work)
    if root is not None and Path(arg).is_relative_to(root):
        return str(Path(arg).relative_to(root))
    return Path(arg).name


def script_name(script: Path | LearnerFile, root: Path | None = None) -> str:
    """The script as the lab names it (``bin/check.sh``), or one of the grader's by its file's name."""
    if isinstance(script, LearnerFile):
        return str(script)
    if root is not None and Path(script).is_relative_to(root):
        return str(Path(script).relative_to(root))
    return Path(script).name


def _view(view: DoctoredView) -> dict[str, Any]:
    """A view as evidence: what it hides is counted, never named (a random choice the learner must not learn)."""
    hidden = len(view.doctor.hidden)
    shown: dict[str, Any] = {"view": "read-only" + (f", {hidden} Pods hidden" if hidden else "")}
    if view.doctor.taints:
        shown["tainted"] = sorted(view.doctor.taints)
    shown[COPY_PORT] = str(view.upstream.port)  # which copy it shows is known where the check reads the run
    return shown


def _given_files(
    args: tuple[str, ...], inputs: Iterable[tuple[str, Path]], root: Path | None, work: Path
) -> dict[str, dict[str, Any]]:
    """The head of each file the grader made in its ``work`` folder (not the lab ``root``) and gave the run (a generated dump named in its
    arguments, or put in its folder), by the name the run knows it by; a few at most."""
    given = [(Path(arg).name, Path(arg)) for arg in args if arg.startswith("/")]
    made = [(name, path) for name, path in [*given, *inputs] if Path(path).is_relative_to(work)]
    made = [(name, path) for name, path in made if root is None or not Path(path).is_relative_to(root)]
    return {name: {**quoting.file_head(Path(path)), **_runtimes(Path(path))} for name, path in made[:GIVEN_FILES]}


def _runtimes(path: Path) -> dict[str, Any]:
    """The runtime tables a containerd configuration the grader made defines (what such a dump is about), a dozen
    at most; nothing for another file."""
    if path.suffix != ".toml" or not path.is_file():
        return {}
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            text = handle.read(256 * 1024)
    except OSError:
        return {}
    tables = [line.strip() for line in text.splitlines() if RUNTIME_TABLE.match(line)]
    return {"runtime_tables": [quoting.head(table, quoting.LINE_CHARS)[0] for table in tables[:12]]}


def given(
    script: Path | LearnerFile,
    args: tuple[str, ...],
    options: dict[str, Any],
    view: DoctoredView | None,
    places: tuple[Path | None, Path],
) -> dict[str, Any]:
    """What a run was given, as its evidence says it; ``places`` are the lab root and the grader's folder (the
    grading's temporary one)."""
    root, work = places
    shown: dict[str, Any] = {"script": script_name(script, root), "args": [_argument(arg, root, work) for arg in args]}
    if options.get("dump"):
        shown["dump"] = options["dump"]
    if options.get("dump_text"):
        shown["generated_dump"] = quoting.quoted_lines(options["dump_text"])
    if options.get("cluster"):
        shown["cluster"] = True
    if not options.get("containerd", True):
        shown["containerd"] = False
    if options.get("api"):
        shown["api"] = options["api"]
    keeps = options.get("keeps")
    if isinstance(keeps, Keeps) and (keeps.state or keeps.inputs):
        shown["kept"] = {"state": keeps.state is not None, "inputs": [name for name, _ in keeps.inputs]}
    files = _given_files(args, keeps.inputs if isinstance(keeps, Keeps) else (), root, work)
    if files:
        shown["files"] = files
    if view is not None:
        shown.update(_view(view))
    return shown


def entry(given: dict[str, Any], result: ScriptResult, root: Path | None, work: Path) -> dict[str, Any]:
    """A run's evidence entry: what it was given, its exit status and duration, the head of its output."""
    made: dict[str, Any] = {"run": given, "exit": result.exit_code, "duration": round(result.duration, 3)}
    if result.exit_code is None:
        made["ended"] = result.describe()
    for stream in ("stdout", "stderr"):
        text, cut = quoting.head(plain(getattr(result, stream), root, work), evidence.OUTPUT_CHARS)
        made[stream] = text
        if cut or getattr(result, f"{stream}_truncated"):
            made[f"{stream}_cut"] = True
    return made


def note_run(run: LearnerRun) -> None:
    """The run, once, in the current check's evidence."""
    current = evidence.EVIDENCE.get()
    if current is None or not run.given:
        return
    given = dict(run.given["run"])
    copy = evidence.copy_at(given.pop(COPY_PORT, ""))
    if copy is not None:
        given["near_misses"] = copy
    current.add(("run", id(run.result)), {**run.given, "run": given})


def note_script(script: Path | LearnerFile) -> None:
    """A learner's script the check asked to run, as a file (that it is not there, or its first lines)."""
    if isinstance(script, LearnerFile) and not script.path.is_file():
        script.exists()
