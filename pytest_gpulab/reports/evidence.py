"""The evidence in a grading report: its size bound, what each step read, and each check's evidence as a learner
reads it (``gpulab explain REPORT CHECK``).

A check's ``evidence`` is a list of entries (:mod:`pytest_gpulab.grading.evidence`): ``{"file": PATH, "lines":
[...]}``, ``{"object": {kind, namespace, name, resourceVersion}, "fields": {...}}``, ``{"list": {kind, namespace,
labelSelector, fieldSelector}, "count": N}``, ``{"run": {script, args, ...}, "exit": N, "stdout": ..., "stderr":
...}``, and last ``{"cut": ...}`` when some were left out. The report as a whole stays under :data:`REPORT_LIMIT`:
the largest evidence is cut first, then the largest instructor's detail, each cut marked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

REPORT_LIMIT = 1024 * 1024  # bytes of a report, as written
ROOM = 16 * 1024  # kept for what the session adds (cluster_reads) and for the estimate's error
FAR_BELOW = 8  # indentation adds less than this factor to a report's compact size
ANY_KIND = "*"  # a script that read the cluster may have read any kind
LEFT_OUT = "left out to keep the report under 1 MiB"


def _size(value: Any) -> int:
    return len(json.dumps(value, indent=1, default=str).encode())


def _checks(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for step in document.get("steps") or []:
        yield from step.get("checks") or []


def _shrunk(field: str, value: Any) -> Any:
    """Half the evidence's entries, marked; for a detail or a single entry, a mark alone."""
    if field == "evidence" and isinstance(value, list) and len(value) > 2:
        kept = [entry for entry in value[: len(value) // 2] if "cut" not in entry]
        return [*kept, {"cut": f"{len(value) - len(kept)} entries {LEFT_OUT}"}]
    return [{"cut": f"evidence {LEFT_OUT}"}] if field == "evidence" else f"(detail {LEFT_OUT})"


def _cut(document: dict[str, Any], field: str, limit: int) -> None:
    """Shrink ``field`` of the largest checks until the document's size is under ``limit``."""
    checks = list(_checks(document))
    total = _size(document)
    while total > limit:
        sizes = [(_size(check.get(field)), index) for index, check in enumerate(checks)]
        size, index = max(sizes, default=(0, -1))
        smaller = _shrunk(field, checks[index].get(field)) if index >= 0 else None
        if index < 0 or _size(smaller) >= size:
            return
        checks[index][field] = smaller
        document["cut"] = True
        total = _size(document)


def bounded(document: dict[str, Any], limit: int = REPORT_LIMIT - ROOM) -> dict[str, Any]:
    """The report within ``limit`` bytes as written: evidence cut first, then details; ``"cut": true`` if any was.
    A report far below it is measured without its indentation only (a report is written after every check)."""
    if len(json.dumps(document, default=str).encode()) <= limit // FAR_BELOW:
        return document
    if _size(document) > limit:
        for field in ("evidence", "detail"):
            _cut(document, field, limit)
    return document


def step_reads(step: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The files (paths under the lab root) and the Kubernetes kinds a report's step entry read, from its checks'
    evidence; a learner script run on the cluster adds :data:`ANY_KIND`, and the script itself is a file read.

    Example:: files, kinds = step_reads(report["steps"][3])  # {"bin/ds-coverage.sh", ...}, {"Pod", "DaemonSet", "*"}
    """
    files: set[str] = set()
    kinds: set[str] = set()
    for check in step.get("checks") or []:
        for entry in check.get("evidence") or []:
            if isinstance(entry.get("file"), str):
                files.add(entry["file"])
            for key in ("object", "list"):
                if isinstance(entry.get(key), Mapping) and isinstance(entry[key].get("kind"), str):
                    kinds.add(entry[key]["kind"])
            run = entry.get("run")
            if isinstance(run, Mapping):
                files.add(str(run.get("script")))
                kinds.update([ANY_KIND] if run.get("cluster") else [])
    return files, kinds
