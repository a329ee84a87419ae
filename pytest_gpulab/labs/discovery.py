"""The labs this installation can grade: discovered, never registered.

A lab is a folder holding a ``lab.toml`` (see :mod:`pytest_gpulab.labs.labfile`).
Labs are found in two places:

- installed packages that declare entry points in the group
  ``pytest_gpulab.labs``; each entry point names a package whose folder is a
  lab folder or holds lab folders (this project declares its own labs that way);
- the folders given as lab directories (``--lab-dir``), each a lab folder or a
  folder of them. A lab found there wins over an installed lab of the same name.

A lab folder that cannot be read does not hide the others: it is listed as a
problem, and named when that lab is asked for. Usable without pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from .labfile import LAB_FILE, Lab, LabFileError, NodeSpec, load_lab

__all__ = ["ENTRY_POINT_GROUP", "Catalog", "Lab", "NodeSpec", "UnknownLab", "discover", "lab_folders"]

ENTRY_POINT_GROUP = "pytest_gpulab.labs"


class UnknownLab(LookupError):
    def __init__(self, name: str, catalog: Catalog) -> None:
        self.name = name
        known = ", ".join(catalog.names) or "none"
        problems = "".join(f"\n  {problem}" for problem in catalog.problems)
        super().__init__(
            f"unknown lab {name!r}; the labs found are: {known}"
            + (f"\nThese lab folders could not be read:{problems}" if problems else "")
        )


@dataclass(frozen=True)
class Catalog:
    labs: Mapping[str, Lab]
    problems: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return sorted(self.labs)

    def get(self, name: str) -> Lab:
        if name not in self.labs:
            raise UnknownLab(name, self)
        return self.labs[name]


def lab_folders(directory: Path) -> list[Path]:
    """``directory`` itself if it is a lab folder, else its sub-folders that are, by name."""
    directory = Path(directory)
    if (directory / LAB_FILE).is_file():
        return [directory]
    if not directory.is_dir():
        return []
    return sorted(child for child in directory.iterdir() if (child / LAB_FILE).is_file())


def _installed_folders(problems: list[str]) -> list[Path]:
    folders: list[Path] = []
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            root = Path(str(resources.files(entry_point.value)))
        except (ImportError, TypeError, ValueError) as error:
            problems.append(f"entry point {entry_point.name} = {entry_point.value!r} ({ENTRY_POINT_GROUP}): {error}")
            continue
        folders += [folder for folder in lab_folders(root) if folder not in folders]
    return folders


def _read_labs(folders: Iterable[Path], problems: list[str]) -> dict[str, Lab]:
    labs: dict[str, Lab] = {}
    for folder in folders:
        try:
            lab = load_lab(folder)
        except LabFileError as error:
            problems.append(str(error))
            continue
        if lab.name in labs:
            problems.append(
                f"{folder}: a second lab named {lab.name!r} (the first is {labs[lab.name].folder}); it is ignored."
            )
            continue
        labs[lab.name] = lab
    return labs


def discover(lab_dirs: Sequence[Path] = ()) -> Catalog:
    """Every lab installed or in ``lab_dirs``; the latter win over installed labs of the same name."""
    problems: list[str] = []
    installed = _read_labs(_installed_folders(problems), problems)
    given: list[Path] = []
    for directory in lab_dirs:
        found = lab_folders(directory)
        if not found:
            problems.append(f"{directory}: no {LAB_FILE} there or in its sub-folders.")
        given += found
    return Catalog({**installed, **_read_labs(given, problems)}, tuple(problems))
