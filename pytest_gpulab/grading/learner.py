"""The learner's files, as a grader reads them: a path relative to the lab root.

``learner.file("out/merge.txt").key_values("MAIN_RUNTIMES")`` reads with the
lenient parsers of :mod:`pytest_gpulab.grading.parsing`, and every message shows the
path as the lab names it (``out/merge.txt``), never the grader's absolute one.
Nothing here writes. Usable without pytest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import evidence, parsing, values
from .feedback import StepFailed, fail


@dataclass(frozen=True)
class LearnerFile:
    root: Path
    relative: str

    @property
    def path(self) -> Path:
        return self.root / self.relative

    def __str__(self) -> str:
        return self.relative

    def exists(self) -> bool:
        found = self.path.is_file()
        if self._inside():
            evidence.note_file(self.relative, self.path)
        return found

    @property
    def executable(self) -> bool:
        return os.access(self.path, os.X_OK)

    def _inside(self) -> bool:
        try:
            return self.root.resolve() in self.path.resolve().parents
        except (OSError, RuntimeError):  # a symlink loop
            return False

    @property
    def readable(self) -> Path:
        """The path, once it is known to stay inside the lab directory: a link out of it is not followed,
        so no file of the machine's (``/etc/shadow``) is ever read, or quoted, as the learner's. The file is
        recorded as the current check's evidence (:mod:`.evidence`)."""
        __tracebackhide__ = True
        if not self._inside():
            fail(f"{self} leads out of the lab directory (a symbolic link); make it a regular file there.")
        evidence.note_file(self.relative, self.path)
        return self.path

    def text(self) -> str:
        __tracebackhide__ = True
        return parsing.read_text(self.readable, self.relative)

    def lines(self, count: int) -> list[str]:
        """The first ``count`` lines that are neither blank nor ``#`` comments."""
        __tracebackhide__ = True
        return parsing.first_lines(self.text(), count)

    def code(self) -> str:
        """A script's text without its comments: what it does, not what it says about itself."""
        __tracebackhide__ = True
        return parsing.without_comments(self.text())

    def toml(self) -> dict[str, Any]:
        __tracebackhide__ = True
        return evidence.note_document(self.relative, parsing.load_toml(self.readable, self.relative))

    def toml_or_none(self) -> dict[str, Any] | None:
        """The TOML document, or None when it cannot be read: another step grades this file."""
        try:
            return self.toml()
        except StepFailed:
            return None

    def objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object in the file (all documents, ``kind: List`` expanded)."""
        __tracebackhide__ = True
        return evidence.note_document(self.relative, parsing.load_yaml_documents(self.readable, self.relative))

    def object(self, kind: str, name: str, *, applied_to: str | None = None) -> dict[str, Any]:
        """The object of ``kind`` named ``name`` in the file; a failure saying so when it is not there. With
        ``applied_to``, the object as the file makes it when applied to that namespace (``kubectl apply -n NS``):
        a file that leaves its namespace out takes that one, so the file is judged only for what it alone holds.

        Example:: learner.file("k8s/pod.yaml").object("Pod", "probe", applied_to="gpu-rt")
        """
        __tracebackhide__ = True
        objects = self.objects()
        found = parsing.find_object(objects, kind, name)
        if found is None:
            fail(f"{self}: no {kind} named {name}.")
        if sum(parsing.find_object([obj], kind, name) is not None for obj in objects) > 1:
            fail(f"{self} defines the {kind} {name} more than once; applied, the last one wins. Keep one.")
        metadata = found.get("metadata")
        if applied_to and isinstance(metadata, dict) and not metadata.get("namespace"):
            found = {**found, "metadata": {**metadata, "namespace": applied_to}}
        return found

    def key_values(self, *required: str) -> dict[str, str]:
        """The ``KEY=VALUE`` lines; a missing required key, or one given twice, fails."""
        __tracebackhide__ = True
        return evidence.note_document(
            self.relative, values.read_key_values(self.readable, self.relative, required=required)
        )

    def amount_table(self) -> dict[str, list[int | str]]:
        """A NAME/AMOUNT table as {name: [amount, ...]} (see :func:`values.read_amount_table`)."""
        __tracebackhide__ = True
        return values.read_amount_table(self.readable, self.relative)


HOST_CONTAINERD = "/etc/containerd"


@dataclass(frozen=True)
class LearnerWork:
    """The learner's lab root; graders only read below it.

    ``homes`` are the absolute paths the root stood at as the learner wrote it (the one a bundle
    records, and the lab's default root): a path the learner wrote under any of them is read from
    ``root``, wherever the grader now finds it, so live grading and a bundle's read the same files.
    """

    root: Path
    homes: tuple[str, ...] = ()

    def file(self, relative: str) -> LearnerFile:
        return LearnerFile(self.root, relative)

    def __truediv__(self, relative: str) -> LearnerFile:
        return self.file(relative)

    def inside(self, written: str, *, config: str | None = None) -> Path | None:
        """Where a path the learner wrote (in a config file: an imports glob) is in the grader's copy of the lab
        root, or None when it points outside it. Absolute paths under the root, wherever it stood (its ``homes``),
        or under /etc/containerd, which ``config`` (the lab's folder standing for it) replaces, are mapped; a
        relative one is taken from ``config``. The same rule in every step, live and from a bundle.

        Example:: learner.inside("/root/gpurt/etc/conf.d/*.toml", config="etc")  # root / "etc/conf.d/*.toml"
        """
        text = written.strip()
        if not text.startswith("/"):
            return self.root / (config or "") / text if config is not None else None
        mapped = [(HOST_CONTAINERD, config)] if config is not None else []
        mapped += [(home.rstrip("/"), "") for home in (*self.homes, str(self.root)) if home.rstrip("/")]
        for prefix, folder in sorted(mapped, key=lambda pair: -len(pair[0])):
            if text == prefix or text.startswith(prefix + "/"):
                rest = text[len(prefix) :].lstrip("/")
                return self.root / folder / rest if folder else self.root / rest
        return None

    def glob(self, written: str, *, config: str) -> list[Path]:
        """The files below the root that an imports glob the learner wrote catches, as containerd reads it: a
        relative glob from ``config`` (the lab's folder standing for /etc/containerd), an absolute one under
        /etc/containerd or under the lab root wherever it stood. ``*`` stays within one folder (Go's
        filepath.Glob); a glob that climbs out or points elsewhere catches nothing.

        Example:: learner.glob("conf.d/*.toml", config="etc/containerd")
        """
        target = self.inside(written, config=config)
        if target is None:
            return []
        try:
            relative = target.relative_to(self.root)
        except ValueError:
            return []
        if not relative.parts or ".." in relative.parts or "**" in relative.parts:
            return []
        try:
            return sorted(path for path in self.root.glob(str(relative)) if path.is_file())
        except (ValueError, OSError):
            return []

    def catches(self, globs: list[str], relative: str, *, config: str) -> list[str]:
        """Those of ``globs`` that catch the learner's file ``relative``.

        Example:: learner.catches(imports_of(main), "etc/conf.d/99-nvidia.toml", config="etc")
        """
        wanted = self.file(relative).path.resolve()
        return [glob for glob in globs if wanted in {path.resolve() for path in self.glob(glob, config=config)}]
