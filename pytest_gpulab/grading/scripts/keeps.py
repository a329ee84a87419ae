"""What a learner-script run is given beyond its own fresh places: a state kept across runs, files in its
working directory, writable copies of its inputs. The checker contract's second run and relative-path run
use them (:mod:`pytest_gpulab.grading.scripts.checker`). Usable without pytest.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Keeps:
    """What a run is given beyond the usual: ``state``, a folder kept across runs, which stands for its /tmp,
    /var/tmp, $HOME and $TMPDIR (so a second run finds what the first left there); ``inputs``, files put in its
    working directory under these relative names; ``writable_inputs``, its file arguments and inputs exposed
    writable (copies the grader made), so a write into them lands where the grader can see it."""

    state: Path | None = None
    inputs: tuple[tuple[str, Path], ...] = ()
    writable_inputs: bool = False


NOTHING_KEPT = Keeps()


def kept_places(state: Path, home: str | None, scratch: Path, user: int | None) -> dict[Path, Path]:
    """Where a run with ``state`` finds the folders kept across runs: inside path -> the folder in ``state``."""
    places = {Path("/tmp"): state / "tmp", Path("/var/tmp"): state / "var-tmp", scratch: state / "work"}
    if home and Path(home).is_absolute() and Path(home) != Path("/"):
        places[Path(home)] = state / "home"
    for folder in places.values():
        folder.mkdir(parents=True, exist_ok=True)
        if user is not None:
            os.chown(folder, user, user)
    return places


def unbound(keeps: Keeps, scratch: Path, extra: dict[str, str], user: int | None) -> Path:
    """Without bind mounts: the inputs copied into the working directory, and the kept state's folders named
    by $HOME and $TMPDIR (its working directory the kept one)."""
    if keeps.state is not None:
        kept = kept_places(keeps.state, "/home", scratch, user)
        scratch = kept[scratch]
        extra.update(HOME=str(kept[Path("/home")]), TMPDIR=str(kept[Path("/tmp")]))
    for name, source in keeps.inputs:
        target = scratch / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        if user is not None:
            os.chown(target, user, user)
    return scratch
