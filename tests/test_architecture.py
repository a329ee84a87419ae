"""The package's layers, held by a test on its import graph: imports point down, and none goes round.

Each module belongs to one layer; a module may import its own layer and the ones below, never above
(an import inside a function counts; one under ``if TYPE_CHECKING:`` does not, since it never runs).
So the cluster layer imports no grading helper, and the sandbox none of the grading's wording.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_gpulab"
LAYERS: list[tuple[str, set[str]]] = [
    ("labs and base", {"errors", "waiting", "labfile", "labs", "kinds"}),
    ("the lab cluster", {"toolchain", "kwokctl", "kwokconfig", "ports", "transport", "bringup", "kwok", "snapshot",
                         "crowd", "upstream"}),
    ("the sandbox", {"seccomp", "bwrap", "sandbox", "pipes", "supervision", "script_result", "runner",
                                 "forward", "doctor", "clusterview", "containerd", "containerd_dumps"}),
    ("grading helpers", {"feedback", "parsing", "learner", "live", "kube", "manifests",
                                      "containerd_toml", "nodes", "answers", "verdicts", "scripts", "grading"}),
    ("reports", {"steps", "reporting", "summary", "report_file", "gradescope"}),
    ("cohort grading", {"bundle", "unbundle", "regrade", "batch", "cohort_model", "cohort", "cohort_html", "jobs",
                        "autograder", "variants", "selftest", "selftest_judge", "selftest_state"}),
    ("plugin and CLI", {"__init__", "plugin", "fixtures", "collect", "settings", "options", "guard",
                                         "session", "cli", "cli_cohort"}),
]  # fmt: skip
LAYER_OF = {module: index for index, (_, modules) in enumerate(LAYERS) for module in modules}


class _Imports(ast.NodeVisitor):
    """The package's modules a module imports when it runs."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 1:
            names = [node.module] if node.module else [alias.name for alias in node.names]
            self.found.update(name.split(".")[0] for name in names)
        elif node.module and node.module.startswith("pytest_gpulab."):
            self.found.add(node.module.split(".")[1])


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text()))
        graph[path.stem] = {name for name in visitor.found if name != "fake_containerd" and name != path.stem}
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


def test_every_module_has_a_layer():
    unplaced = sorted(set(import_graph()) - set(LAYER_OF))
    assert not unplaced, f"place {unplaced} in a layer of tests/test_architecture.py (LAYERS)"


def test_imports_point_down():
    upward = [
        f"{module} ({LAYERS[LAYER_OF[module]][0]}) imports {name} ({LAYERS[LAYER_OF[name]][0]})"
        for module, names in import_graph().items()
        for name in sorted(names)
        if module in LAYER_OF and name in LAYER_OF and LAYER_OF[name] > LAYER_OF[module]
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


def test_the_readme_s_layout_lists_every_module_in_its_layer():
    block = (PACKAGE.parent / "README.md").read_text().split("## Layout", 1)[1].split("```")[1]
    listed: dict[str, set[str]] = {}
    current = ""
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            current = line[2:20].strip()
        if current and line.startswith("  "):
            listed.setdefault(current, set()).update(w for w in line[20:].split() if w.isidentifier())
    present = set(import_graph())
    expected = {name: (modules & present) - {"__init__"} for name, modules in LAYERS}
    words = {"the", "authors", "one", "import"}
    assert {layer: names - words for layer, names in listed.items()} == expected
