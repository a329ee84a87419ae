"""What changed: a file under the lab root or an object of the lab's cluster, as the watches report it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

FILE, OBJECT, UNKNOWN = "file", "object", "unknown"


@dataclass(frozen=True)
class Change:
    """``file``: ``name`` is a path relative to the lab root; ``object``: ``kind`` and ``namespace/name``;
    ``unknown``: something changed that the watch could not follow (every step is touched)."""

    what: str
    name: str
    kind: str | None = None

    def __str__(self) -> str:
        if self.what == OBJECT:
            return f"{self.kind} {self.name}"
        return self.name or "(unknown)"


Report = Callable[[Change], None]
