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

from . import parsing, values
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
        return self.path.is_file()

    @property
    def executable(self) -> bool:
        return os.access(self.path, os.X_OK)

    @property
    def readable(self) -> Path:
        """The path, once it is known to stay inside the lab directory: a link out of it is not followed,
        so no file of the machine's (``/etc/shadow``) is ever read, or quoted, as the learner's."""
        __tracebackhide__ = True
        try:
            inside = self.root.resolve() in self.path.resolve().parents
        except (OSError, RuntimeError):  # a symlink loop
            inside = False
        if not inside:
            fail(f"{self} leads out of the lab directory (a symbolic link); make it a regular file there.")
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
        return parsing.load_toml(self.readable, self.relative)

    def toml_or_none(self) -> dict[str, Any] | None:
        """The TOML document, or None when it cannot be read: another step grades this file."""
        try:
            return self.toml()
        except StepFailed:
            return None

    def objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object in the file (all documents, ``kind: List`` expanded)."""
        __tracebackhide__ = True
        return parsing.load_yaml_documents(self.readable, self.relative)

    def object(self, kind: str, name: str) -> dict[str, Any]:
        """The object of ``kind`` named ``name`` in the file; a failure saying so when it is not there."""
        __tracebackhide__ = True
        objects = self.objects()
        found = parsing.find_object(objects, kind, name)
        if found is None:
            fail(f"{self}: no {kind} named {name}.")
        if sum(parsing.find_object([obj], kind, name) is not None for obj in objects) > 1:
            fail(f"{self} defines the {kind} {name} more than once; applied, the last one wins. Keep one.")
        return found

    def key_values(self, *required: str) -> dict[str, str]:
        """The ``KEY=VALUE`` lines; a missing required key, or one given twice, fails."""
        __tracebackhide__ = True
        return values.read_key_values(self.readable, self.relative, required=required)

    def amount_table(self) -> dict[str, list[int | str]]:
        """A NAME/AMOUNT table as {name: [amount, ...]} (see :func:`values.read_amount_table`)."""
        __tracebackhide__ = True
        return values.read_amount_table(self.readable, self.relative)


@dataclass(frozen=True)
class LearnerWork:
    """The learner's lab root; graders only read below it."""

    root: Path

    def file(self, relative: str) -> LearnerFile:
        return LearnerFile(self.root, relative)

    def __truediv__(self, relative: str) -> LearnerFile:
        return self.file(relative)
