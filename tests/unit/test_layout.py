"""The package's shape: no import cycle (not even under TYPE_CHECKING), small modules.

Issue 9: a message travels down the modules and never climbs back up; a module that passes
about 300 lines, or holds two concepts, is asking to be split.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "continuum"
#: "About 300 lines": the limit a module may reach before it must be split.
MAX_MODULE_LINES = 330


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports (at any level)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith("continuum"):
                    continue
                for alias in node.names:  # `from continuum.cli import run`: the submodule
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("continuum")}
        found[name] = {d for d in deps if d in modules and d != name}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, path = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_module_of_the_package_imports_back_into_a_module_that_imports_it():
    graph = imports()
    # The public door re-exports; nothing inside may import it, except the layers built on
    # the public API as a user's code is (the test helpers, the integrations).
    outside = ("continuum.testing", "continuum.integrations")
    inside = [m for m in graph if m != "continuum" and not m.startswith(outside)]
    assert not [m for m in inside if "continuum" in graph[m]]
    assert cycles(graph) == []


def test_no_module_is_much_longer_than_three_hundred_lines():
    long = {
        module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
