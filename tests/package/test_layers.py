"""The package's layers: what may import what, read from each package's ``May import:`` line.

Each package under continuum/ ends its docstring with a paragraph ``May import: a, b, c.``
(``continuum`` is the public door continuum/__init__.py, ``errors`` the module
continuum/errors.py). These tests hold every import to that line, at module level, under
TYPE_CHECKING and inside functions alike; keep the Lambda path clear of the local runtime,
the operator views, the command line, the timeline, the test helpers, the integrations and
the optional dependencies; and refuse module names a letter apart. A failure names the file,
the line and the rule.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "continuum"
#: The packages of continuum/, each with its ``May import:`` line.
PACKAGES = (
    "_base",
    "backends",
    "_record",
    "_define",
    "_steps",
    "_waits",
    "_fanout",
    "_turn",
    "_worker",
    "_ops",
    "_app",
    "_local",
    "cli",
    "testing",
    "timeline",
    "scaffold",
    "integrations",
)
DOOR, ERRORS = "continuum", "errors"
#: What an invocation on Lambda loads: these packages and handlers/.
LAMBDA_PATH = (
    "_base",
    "backends",
    "_record",
    "_define",
    "_steps",
    "_waits",
    "_fanout",
    "_turn",
    "_worker",
)
#: What the Lambda path never imports: the local and operator side, and the public door.
NOT_ON_LAMBDA = ("_local", "_ops", "cli", "timeline", "testing", "integrations")
#: Extras a plain install does not have, so the Lambda path imports them only where used.
OPTIONAL = ("pydantic_ai", "opentelemetry", "moto", "freezegun")


@dataclass(frozen=True)
class Import:
    """One import of a continuum module (or of an optional dependency)."""

    file: str  # relative to the repository, e.g. continuum/_worker/worker.py
    line: int
    module: str  # the dotted module imported
    target: str  # its package (a name of PACKAGES), DOOR, ERRORS, or the top-level name
    module_level: bool  # runs when the file is imported (not in a function, not TYPE_CHECKING)

    def where(self) -> str:
        return f"{self.file}:{self.line}: imports {self.module}"


def package_of(path: Path) -> str:
    """The package a file of continuum/ belongs to: a name of PACKAGES, DOOR or ERRORS."""
    parts = path.relative_to(PACKAGE).parts
    if len(parts) == 1:
        return DOOR if parts[0] == "__init__.py" else parts[0].removesuffix(".py")
    return parts[0]


def target_of(module: str) -> str:
    """The package a dotted module name lands in (for continuum's), else its top-level name."""
    parts = module.split(".")
    if parts[0] != "continuum":
        return parts[0]
    return parts[1] if len(parts) > 1 else DOOR


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def imports_of(path: Path) -> list[Import]:
    """Every import in a file, with its line and whether it runs when the file is imported."""
    relative = path.relative_to(ROOT).as_posix()
    dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    found: list[Import] = []

    def add(node: ast.Import | ast.ImportFrom, module: str, module_level: bool) -> None:
        found.append(Import(relative, node.lineno, module, target_of(module), module_level))

    def visit(node: ast.AST, module_level: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name, module_level)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's own package
                anchor = dotted.split(".")[: -node.level]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # `from continuum._record import codec` may import a module: keep the name
                door = base == "continuum" and alias.name not in (*PACKAGES, ERRORS)
                add(node, base if door else f"{base}.{alias.name}", module_level)
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, module_level)
        else:
            inside = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, module_level and not inside)

    visit(ast.parse(path.read_text(), filename=relative), True)
    return found


def files_of(package: str) -> list[Path]:
    if package == DOOR:
        return [PACKAGE / "__init__.py"]
    if package == ERRORS:
        return [PACKAGE / "errors.py"]
    return sorted((PACKAGE / package).rglob("*.py"))


def may_import_line(package: str) -> list[str] | None:
    """The names on a package's ``May import:`` line (its docstring's last paragraph)."""
    docstring = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
    last = (docstring or "").strip().split("\n\n")[-1]
    match = re.fullmatch(r"May import:(.*)\.", " ".join(last.split()))
    if match is None:
        return None
    return [name.strip() for name in match.group(1).split(",") if name.strip()]


def declared() -> dict[str, set[str]]:
    """Each package and what its line lets it import (errors may import nothing)."""
    lines = {package: set(may_import_line(package) or ()) for package in PACKAGES}
    return {**lines, ERRORS: set()}


def breaks(found: list[Import], rule: str, allowed: set[str], own: str) -> list[tuple[Import, str]]:
    return [
        (i, rule)
        for i in found
        if i.module.split(".")[0] == "continuum" and i.target not in {own, *allowed}
    ]


@functools.cache
def layer_breaks() -> list[tuple[Import, str]]:
    """Every import of a continuum module its package's line does not name."""
    lines = declared()
    found = []
    for package, allowed in lines.items():
        rule = f"{package} may import only itself and: {', '.join(sorted(allowed)) or 'nothing'}"
        for path in files_of(package):
            found += breaks(imports_of(path), rule, allowed, package)
    return found


@functools.cache
def lambda_path_breaks() -> list[tuple[Import, str]]:
    """Imports on the Lambda path of what it must never load."""
    found: list[tuple[Import, str]] = []
    paths = [p for package in LAMBDA_PATH for p in files_of(package)]
    handlers = sorted((ROOT / "handlers").glob("*.py"))
    for path in [*paths, *handlers]:
        inside = path.is_relative_to(PACKAGE)
        never = {*NOT_ON_LAMBDA, DOOR} if inside else set(NOT_ON_LAMBDA)
        for i in imports_of(path):
            if i.module.split(".")[0] == "continuum" and i.target in never:
                found.append((i, "the Lambda path never imports " + ", ".join(sorted(never))))
            elif i.target in OPTIONAL and i.module_level:
                rule = f"the Lambda path imports {i.target} (an optional extra) only where used"
                found.append((i, rule))
    return found


def unexpected(found: list[tuple[Import, str]]) -> list[str]:
    return [f"{i.where()} ({rule})" for i, rule in found]


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
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


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph() -> dict[str, dict[str, Import]]:
    """Each module of the package -> the package modules it imports (at any level) -> where."""
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, Import]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        graph[name] = {}
        for i in imports_of(path):
            module = i.module
            while module not in modules and "." in module:  # `from x.y import name`: x.y
                module = module.rsplit(".", 1)[0]
            if module in modules and module != name:
                graph[name].setdefault(module, i)
    return graph


def distance(a: str, b: str) -> int:
    """The edit distance of two names (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, letter in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (letter != other))
            )
        previous = current
    return previous[-1]


def module_names() -> dict[str, list[str]]:
    """Each name of a module or package in continuum/ (less a leading underscore) -> files."""
    names: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for part in path.relative_to(PACKAGE).with_suffix("").parts:
            if part not in ("__init__", "__main__"):
                names.setdefault(part.lstrip("_"), []).append(path.relative_to(ROOT).as_posix())
    return names


@functools.cache
def lookalikes() -> dict[tuple[str, str], str]:
    names = module_names()
    return {
        (a, b): f"{a} ({names[a][0]}) and {b} ({names[b][0]})"
        for a, b in itertools.combinations(sorted(names), 2)
        if distance(a, b) == 1
    }


# -- the rules ---------------------------------------------------------------------------------


def test_every_package_ends_its_docstring_with_a_may_import_line():
    missing = [
        f"continuum/{package}/__init__.py:1: no `May import: a, b.` as the docstring's last "
        "paragraph"
        for package in PACKAGES
        if may_import_line(package) is None
    ]
    assert not missing, "\n".join(missing)


def test_every_may_import_line_names_only_packages_errors_and_the_door():
    known = {*PACKAGES, DOOR, ERRORS}
    strays = [
        f"continuum/{package}/__init__.py:1: `May import:` names {name}, not a package"
        for package in PACKAGES
        for name in may_import_line(package) or ()
        if name not in known or name == package
    ]
    assert not strays, "\n".join(strays)


def test_every_import_of_a_continuum_module_goes_to_a_package_its_line_names():
    broken = unexpected(layer_breaks())
    assert not broken, "\n".join(broken)


def test_the_declared_layers_have_no_cycle():
    graph = declared()
    graph[DOOR] = {i.target for i in imports_of(PACKAGE / "__init__.py")} - {DOOR}
    found = [
        f"continuum/{cycle[0]}/__init__.py:1: the May import: lines make a cycle: "
        + " -> ".join(cycle)
        for cycle in cycles(graph)
    ]
    assert not found, "\n".join(found)


def test_no_module_of_the_package_imports_back_into_a_module_that_imports_it():
    graph = module_graph()
    found = [
        "a cycle of imports: "
        + "; ".join(graph[a][b].where() for a, b in itertools.pairwise(cycle))
        for cycle in cycles(graph)
    ]
    assert not found, "\n".join(found)


def test_the_lambda_path_never_imports_the_local_runtime_operators_cli_or_the_door():
    broken = unexpected([(i, r) for i, r in lambda_path_breaks() if i.target not in OPTIONAL])
    assert not broken, "\n".join(broken)


def test_the_lambda_path_imports_optional_extras_only_inside_functions():
    broken = unexpected([(i, r) for i, r in lambda_path_breaks() if i.target in OPTIONAL])
    assert not broken, "\n".join(broken)


def test_no_two_module_names_differ_by_one_letter():
    found = lookalikes()
    pairs = [f"continuum/: {found[pair]} differ by one letter" for pair in found]
    assert not pairs, "\n".join(pairs)
