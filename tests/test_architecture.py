"""The package's layers, held by a test on its import graph: imports point down, and none goes round.

Each module belongs to one layer; a module may import its own layer and the ones below, never above
(an import inside a function counts; one under ``if TYPE_CHECKING:`` does not, since it never runs).
So the cluster layer imports no grading helper, and the sandbox none of the grading's wording.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_gpulab"
# The layers, bottom first: each a subpackage (the plugin and CLI sit at the package's top).
LAYERS: list[tuple[str, set[str]]] = [
    ("labs and their files", {"labs"}),
    ("the lab cluster", {"cluster"}),
    ("a real node for the Job", {"node"}),
    ("the sandbox and scripts", {"sandbox"}),
    ("the authors' grading helpers", {"grading"}),
    ("reports", {"reports"}),
    ("cohort grading and selftest", {"cohort", "selftest"}),
    ("the watch", {"watch"}),
    ("plugin and CLI", {""}),
]
LAYER_OF = {folder: index for index, (_, folders) in enumerate(LAYERS) for folder in folders}
OUTSIDE = {"graders", "fake_containerd"}  # shipped inside the package, not part of its layers


def module_name(path: Path) -> str:
    """``cluster/kwok.py`` -> ``cluster.kwok``; ``grading/__init__.py`` -> ``grading``; ``plugin.py`` -> ``plugin``."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    return LAYER_OF[module.split(".")[0] if "." in module or module in LAYER_OF else ""]


class _Imports(ast.NodeVisitor):
    """The package's modules a module imports when it runs, as names under the package."""

    def __init__(self, package: list[str]) -> None:
        self.package = package
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package[: len(self.package) - node.level + 1]
        elif node.module and node.module.startswith("pytest_gpulab"):
            base, node = [], ast.ImportFrom(node.module.removeprefix("pytest_gpulab").lstrip("."), node.names, 0)
        else:
            return
        target = [*base, *(node.module.split(".") if node.module else [])]
        for alias in node.names:
            self.found.add(_existing([*target, alias.name]) or ".".join(target))


def _existing(parts: list[str]) -> str | None:
    """The dotted name if it is one of the package's modules (a name imported from a package may be one)."""
    path = PACKAGE.joinpath(*parts)
    return ".".join(parts) if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() else None


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        visitor = _Imports([part for part in package if part])
        visitor.visit(ast.parse(path.read_text()))
        graph[name] = {found for found in visitor.found if found.split(".")[0] not in OUTSIDE and found != name}
    return graph


def depth(graph: dict[str, set[str]]) -> int:
    """The longest chain of imports, counted in modules (an import that goes round is followed once)."""
    memo: dict[str, int] = {}

    def longest(module: str, seen: frozenset[str]) -> int:
        if module in seen:
            return 0
        if module not in memo:
            memo[module] = 1 + max((longest(name, seen | {module}) for name in graph.get(module, ())), default=0)
        return memo[module]

    return max(longest(module, frozenset()) for module in graph)


def test_every_subpackage_has_a_layer():
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    unplaced = sorted(folders - set(LAYER_OF))
    assert not unplaced, f"place {unplaced} in a layer of tests/test_architecture.py (LAYERS)"


def test_imports_point_down():
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {name} ({LAYERS[layer_of(name)][0]})"
        for module, names in import_graph().items()
        for name in sorted(names)
        if layer_of(name) > layer_of(module)
    ]
    assert not upward, upward


def test_no_import_goes_round():
    graph = import_graph()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        if state.get(module) == "open":
            return [*path[path.index(module) :], module]
        if state.get(module) == "done":
            return None
        state[module] = "open"
        for name in sorted(graph.get(module, ())):
            if cycle := visit(name, [*path, module]):
                return cycle
        state[module] = "done"
        return None

    cycles = [cycle for module in sorted(graph) if (cycle := visit(module, []))]
    assert not cycles, " -> ".join(cycles[0])
    assert depth(graph) <= 13, f"the import graph is {depth(graph)} modules deep (13 is the bound: no deeper)"


def test_the_design_notes_layout_lists_every_folder_and_module():
    """Each folder's line (and the lines under it, indented further) names its modules after a colon."""
    block = (PACKAGE.parent / "docs" / "design.md").read_text().split("## Layout", 1)[1].split("```")[1]
    listed: dict[str, set[str]] = {}
    folder, top = "", ""
    for line in block.splitlines():
        if line.startswith("    ") and not line.startswith("     ") and line.split()[0].endswith("/"):
            folder = f"{top}/{line.split()[0].rstrip('/')}"  # a package inside the folder above
        elif line.startswith("  ") and line.split()[0].endswith("/"):
            folder = top = line.split()[0].rstrip("/")
        elif line and not line.startswith(" "):
            folder = "" if line.startswith("pytest_gpulab/") else "-"
        names = line.split(":", 1)[1] if ":" in line else line if line.startswith("    ") else ""
        listed.setdefault(folder, set()).update(w for w in names.split() if w.isidentifier())
    expected: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        folder = path.parent.relative_to(PACKAGE).as_posix().replace(".", "")
        if path.stem != "__init__" and folder.split("/")[0] not in OUTSIDE:
            expected.setdefault(folder, set()).add(path.stem)
    listed.pop("-", None)
    assert {folder: listed.get(folder, set()) for folder in expected} == expected


def test_every_package_ships():
    """A folder of the package with an ``__init__.py`` is in pyproject.toml's packages: else an install (not an
    editable one) leaves it out, and the plugin fails to import."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {
        "pytest_gpulab." + ".".join(path.parent.relative_to(PACKAGE).parts)
        if path.parent != PACKAGE
        else "pytest_gpulab"
        for path in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in path.parts
    }
    assert folders <= listed, sorted(folders - listed)
