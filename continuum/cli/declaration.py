"""What ``continuum start`` needs of a task, read from the app module's source when it is plain.

``start`` checks the input against the task's state model before it creates the record.
Importing the app for that runs everything the app imports (an agent framework and its model,
often most of the command's time), so ``start`` first reads the app module's source with
:mod:`ast`, afresh each time, and takes the declaration from it when it is in this one form:

1. the app is ``APP = Continuum(...)`` in that module, once, with literal arguments (or none),
   ``Continuum`` imported from ``continuum``;
2. the task is the one top-level function decorated ``@APP.task(state=S, ...)``, and only
   that, whose literal ``name=`` (or its own name) is the task asked for; its other arguments
   are literals;
3. ``S`` is a name imported from another module (``from m import S`` or ``import m`` and
   ``m.S``) before the task;
4. nothing in the module could change the app, its settings or the environment: ``APP`` is
   used only as the decorators ``APP.task`` and ``APP.step`` and the entry points, every name
   these rules use is bound once, there is no ``import *``, and no ``os.environ``, dotenv,
   ``globals()``, ``exec`` or the like.

Then only ``m`` is imported, the class must be a pydantic model, and the app is
``Continuum(...)`` with the same arguments, which reads the environment as the app does.
Anything else, any doubt and any exception returns None: ``start`` imports the app, as the
worker does, with the errors that import gives.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from continuum._app.app import Continuum

#: What a plain module may do with its app besides declaring tasks: entry points and steps.
APP_USES = frozenset({"step", "handler", "dead_letter_handler", "callback_link_handler"})
#: ``@APP.task`` arguments whose literal values ``start`` may take as they are written.
TASK_LITERALS = frozenset({"name", "version", "max_continuations", "confidence", "safety_margin_s"})
#: Names that reach a module's namespace or the environment from code: their presence is doubt.
DYNAMIC_NAMES = frozenset(
    {"globals", "vars", "locals", "exec", "eval", "compile", "__import__", "setattr", "delattr",
     "import_module", "load_dotenv", "dotenv_values", "putenv", "unsetenv", "environ"}
)  # fmt: skip
#: Attributes that do the same: ``os.environ``, ``sys.modules``, a module's ``__dict__``.
DYNAMIC_ATTRIBUTES = frozenset(
    {"environ", "putenv", "unsetenv", "modules", "__dict__", "import_module", "load_dotenv"}
)


@dataclass(frozen=True)
class Declared:
    """A task as its declaration states it, and the app it belongs to (without its tasks)."""

    app: Continuum
    name: str
    state_model: type[BaseModel]
    version: int


def read_declaration(target: str, task_name: str) -> Declared | None:
    """Task ``task_name`` of the app ``target`` (``MODULE:APP``) from the app module's source,
    importing only its state model's module; None unless the declaration is plain (see the
    module's docstring)."""
    try:
        return _read(target, task_name)
    except Exception:  # any doubt: the app's own import decides, with its own error
        return None


def _read(target: str, task_name: str) -> Declared | None:
    module_name, _, app_name = target.partition(":")
    if not module_name or not app_name.isidentifier() or module_name in sys.modules:
        return None
    if os.getcwd() not in sys.path:  # as load_target: the current directory is importable
        sys.path.insert(0, os.getcwd())
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        return None
    if not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
        return None
    tree = ast.parse(Path(spec.origin).read_bytes(), filename=spec.origin)
    is_package = spec.submodule_search_locations is not None
    source = _Source(
        tree, module_name, module_name if is_package else module_name.rpartition(".")[0]
    )
    found = source.declaration(app_name, task_name)
    if found is None:
        return None
    app_call, task_call, state = found
    model_module, path = state
    model: Any = importlib.import_module(model_module)
    if module_name in sys.modules:  # the model's module imported the app: take the app as is
        return None
    for part in path:
        model = getattr(model, part)
    from pydantic import BaseModel

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    options = {k.arg: ast.literal_eval(k.value) for k in task_call.keywords if k.arg != "state"}
    name, version = options.get("name", task_name), options.get("version", 1)
    if type(version) is not int or version < 1 or name != task_name:
        return None
    from continuum._app.app import Continuum

    args = [ast.literal_eval(a) for a in app_call.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in app_call.keywords if k.arg}
    return Declared(Continuum(*args, **kwargs), task_name, model, version)


class _Source:
    """The app module's syntax tree, and what its top level binds."""

    def __init__(self, tree: ast.Module, module: str, package: str) -> None:
        self.tree = tree
        self.module = module
        self.package = package
        self.parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.bound = _module_bindings(tree)

    def declaration(
        self, app_name: str, task_name: str
    ) -> tuple[ast.Call, ast.Call, tuple[str, list[str]]] | None:
        """The app's ``Continuum(...)`` call, the task's ``@APP.task(...)`` call and where
        its state model is (module, attribute path); None unless each is plain."""
        if self.bound is None or self._dynamic():
            return None
        app = self._app_call(app_name)
        tasks = self._tasks(app_name)
        if app is None or tasks is None or not self._app_used_plainly(app_name, tasks):
            return None
        named = [(fn, call) for fn, call, name in tasks if name == task_name]
        if len(named) != 1 or None in (name for _, _, name in tasks):
            return None
        fn, call = named[0]
        (app_statement, app_call) = app
        if app_statement.lineno > fn.lineno or not _literal_options(call):
            return None
        states = [k.value for k in call.keywords if k.arg == "state"]
        where = self._imported(states[0], before=fn.lineno) if len(states) == 1 else None
        if where is None or where[0] == self.module:
            return None
        return app_call, call, where

    def _dynamic(self) -> bool:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES:
                return True
            if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_ATTRIBUTES:
                return True
            if isinstance(node, ast.ImportFrom | ast.Import) and any(
                "dotenv" in (n.name or "") for n in node.names
            ):
                return True
            if isinstance(node, ast.ImportFrom) and "dotenv" in (node.module or ""):
                return True
        return False

    def _app_call(self, app_name: str) -> tuple[ast.stmt, ast.Call] | None:
        """``APP = Continuum(literals...)``, a statement of the module's own top level."""
        if not self._bound_once(app_name):
            return None
        for statement in self.tree.body:
            target, value = _assignment(statement)
            if target != app_name or not isinstance(value, ast.Call):
                continue
            if self._imported(value.func, before=statement.lineno) != ("continuum", ["Continuum"]):
                return None
            if not all(_is_literal(a) for a in value.args):
                return None
            if not all(k.arg and _is_literal(k.value) for k in value.keywords):
                return None
            return statement, value
        return None

    def _tasks(
        self, app_name: str
    ) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call, str | None]] | None:
        """Each top-level function declared ``@APP.task(...)`` (its sole decorator), its
        decorator's call and its task name (None: not a literal); None if a declaration is
        not in that form (another decorator beside it, bare, or not at the top level)."""
        tasks = []
        for statement in self.tree.body:
            if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            calls = [d for d in statement.decorator_list if _is_app_attribute(d, app_name, "task")]
            if not calls:
                continue
            (call,) = calls
            if len(statement.decorator_list) != 1 or not isinstance(call, ast.Call):
                return None
            if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(statement)):
                return None  # a generator is refused where it is declared
            names = [k.value for k in call.keywords if k.arg == "name"]
            name = statement.name if not names else _literal_str(names[0])
            tasks.append((statement, call, name))
        return tasks

    def _app_used_plainly(self, app_name: str, tasks: list[Any]) -> bool:
        """The app is named only as its tasks' decorators, as steps' and as entry points."""
        decorators = {id(call.func) for _, call, _ in tasks}
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Name) and node.id == app_name):
                continue
            if isinstance(node.ctx, ast.Store):
                continue  # its one binding, checked by _app_call
            parent = self.parents.get(id(node))
            if not isinstance(parent, ast.Attribute):
                return False
            if parent.attr == "task" and id(parent) in decorators:
                continue
            if parent.attr not in APP_USES:
                return False
        return True

    def _imported(self, node: ast.expr | None, *, before: int) -> tuple[str, list[str]] | None:
        """Where a name (``S``) or a module attribute (``m.S``) comes from, as (module,
        attribute path), when an import statement of the top level alone binds it before line
        ``before``; else None."""
        chain: list[str] = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or not self._bound_once(node.id):
            return None
        for statement in self.tree.body:
            if statement.lineno >= before:
                break
            for alias in getattr(statement, "names", []):
                bound = alias.asname or alias.name.partition(".")[0]
                if bound != node.id:
                    continue
                if isinstance(statement, ast.ImportFrom):
                    dots = "." * statement.level
                    module = importlib.util.resolve_name(
                        dots + (statement.module or ""), self.package
                    )
                    return (module, [alias.name, *chain]) if len(chain) == 0 else None
                if isinstance(statement, ast.Import):
                    # ``import a.b`` binds ``a``, so ``a.b.S``; ``import a.b as m`` is ``m.S``
                    spelt = alias.name.split(".") if alias.asname is None else [alias.name]
                    head, path = chain[: len(spelt) - 1], chain[len(spelt) - 1 :]
                    if alias.asname is None and [node.id, *head] != spelt:
                        return None
                    return (alias.name, path) if len(path) == 1 else None
        return None

    def _bound_once(self, name: str) -> bool:
        return self.bound is not None and self.bound[name] == 1


def _module_bindings(tree: ast.Module) -> Counter[str] | None:
    """How many times each name is bound in the module's namespace (a ``global`` declaration
    counts as a second binding); None if ``import *`` binds what it likes."""
    bound: Counter[str] = Counter()
    for node in _module_scope(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound.update(a.asname or a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound[node.name] += 1
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound[node.id] += 1
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound[node.name] += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound[node.rest] += 1
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            bound.update(dict.fromkeys(node.names, 2))
    return bound


def _module_scope(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes whose bindings land in the module's namespace: everything but the bodies of
    functions, lambdas and classes (their decorators, defaults and bases included)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            stack.extend(
                [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]
            )
        elif isinstance(node, ast.ClassDef):
            stack.extend([*node.decorator_list, *node.bases, *node.keywords])
        elif isinstance(node, ast.Lambda):
            stack.append(node.args)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _assignment(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """``NAME = value`` or ``NAME: T = value``: the name and the value."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return (target.id if isinstance(target, ast.Name) else None), statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def _is_app_attribute(node: ast.expr, app_name: str, attribute: str) -> bool:
    """``APP.attribute`` or ``APP.attribute(...)``."""
    func = node.func if isinstance(node, ast.Call) else node
    return (
        isinstance(func, ast.Attribute)
        and func.attr == attribute
        and isinstance(func.value, ast.Name)
        and func.value.id == app_name
    )


def _literal_options(call: ast.Call) -> bool:
    """``@APP.task`` called with keywords only: ``state=`` and literal known options."""
    if call.args:
        return False
    for keyword in call.keywords:
        if keyword.arg == "state":
            continue
        if keyword.arg not in TASK_LITERALS or not _is_literal(keyword.value):
            return False
    return True


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _literal_str(node: ast.expr) -> str | None:
    value = ast.literal_eval(node) if _is_literal(node) else None
    return value if isinstance(value, str) else None
