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
4. every statement of the module's top level (and of its classes' bodies) is of a kind that
   cannot change the model, the app or the environment: an import of the standard library,
   continuum, pydantic or an installed distribution (a module of the project itself is its
   own code: doubt), ``def`` and ``class``, ``NAME = value``, a docstring, a call of an
   installed package's object, and ``if __name__ == "__main__":``; every call at the top level
   is of an installed package, of a few pure builtins and standard-library constructors, or
   of a local class without methods; the model's module's names appear only as ``state=`` and
   in annotations; ``APP`` is used only as ``APP.task``, ``APP.step`` and the entry points;
   every name these rules use is bound once, and there is no ``import *``.

The model's module must not import the app module. Then only ``m`` is imported, the class
must be a complete pydantic model that validates the input or refuses it with a
ValidationError, and the app is ``Continuum(...)`` with the same arguments, which reads the
environment as the app does.
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
#: Top-level packages that are continuum's own or its dependencies, never the user's code.
LIBRARIES = frozenset({"continuum", "pydantic", "pydantic_core", "typing_extensions"})
#: Installed packages whose purpose is to set the environment: importing one is doubt.
ENVIRONMENT_SETTERS = frozenset({"dotenv", "environs", "decouple"})
#: Builtins a top level may call: they build values and never call what they are given.
PURE_BUILTINS = frozenset(
    {"bool", "bytes", "classmethod", "dict", "float", "frozenset", "int", "len", "list",
     "object", "property", "range", "repr", "set", "staticmethod", "str", "tuple"}
)  # fmt: skip
#: Standard-library callables a top level may call: constructors and pure decorators.
PURE_STANDARD_CALLS = frozenset(
    {"abc.abstractmethod", "dataclasses.dataclass", "dataclasses.field", "datetime.date",
     "datetime.datetime", "datetime.time", "datetime.timedelta", "datetime.timezone",
     "decimal.Decimal", "enum.auto", "functools.cache", "functools.lru_cache",
     "functools.wraps", "logging.getLogger", "pathlib.Path", "pathlib.PurePosixPath",
     "re.compile", "typing.NewType", "typing.ParamSpec", "typing.TypeVar", "typing.final",
     "typing.overload", "uuid.UUID", "abc.ABC", "enum.Enum", "enum.IntEnum", "enum.StrEnum",
     "typing.Generic", "typing.NamedTuple", "typing.Protocol", "typing.TypedDict"}
)  # fmt: skip


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
    if _imports_module(model_module, module_name):  # importing it would run the app partly
        return None
    model: Any = importlib.import_module(model_module)
    if module_name in sys.modules:  # the model's module imported the app: take the app as is
        return None
    for part in path:
        model = getattr(model, part)
    from pydantic import BaseModel

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    if not model.__pydantic_complete__:  # the app module may complete it (model_rebuild)
        return None
    options = {k.arg: ast.literal_eval(k.value) for k in task_call.keywords if k.arg != "state"}
    name, version = options.get("name", task_name), options.get("version", 1)
    if type(version) is not int or version < 1 or name != task_name:
        return None
    from continuum._app.app import Continuum

    args = [ast.literal_eval(a) for a in app_call.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in app_call.keywords if k.arg}
    return Declared(Continuum(*args, **kwargs), task_name, model, version)


def settles(declared: Declared, payload: Any) -> bool:
    """Whether the declared model validates ``payload`` as the app's would: it accepts it or
    refuses it with a ValidationError; any other error is doubt (import the app)."""
    from pydantic import ValidationError

    try:
        if isinstance(payload, str | bytes):
            declared.state_model.model_validate_json(payload)
        else:
            declared.state_model.model_validate(payload)
    except ValidationError:
        return True
    except Exception:
        return False
    return True


def _imports_module(module: str, imported: str) -> bool:
    """Whether ``module``'s source imports ``imported`` anywhere in it; True when the source
    cannot be read."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return True
    if not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
        return True
    tree = ast.parse(Path(spec.origin).read_bytes(), filename=spec.origin)
    package = module if spec.submodule_search_locations is not None else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        if imported in names:
            return True
    return False


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
        if self.bound is None:
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
        allowed = {id(n) for n in ast.walk(states[0])}
        if not _TopLevel(self, app_name, where[0], allowed).plain():
            return None
        return app_call, call, where

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

    def imports(self) -> dict[str, str]:
        """Each name an import of the top level binds, and the dotted name it binds (``x``
        from ``from m import x``: ``m.x``; ``import a.b``: ``a``; ``import a.b as m``: ``a.b``)."""
        found: dict[str, str] = {}
        for statement in self.tree.body:
            for alias in getattr(statement, "names", []):
                if isinstance(statement, ast.ImportFrom):
                    dots = "." * statement.level
                    module = importlib.util.resolve_name(
                        dots + (statement.module or ""), self.package
                    )
                    found[alias.asname or alias.name] = f"{module}.{alias.name}"
                elif isinstance(statement, ast.Import):
                    spelt = alias.name if alias.asname else alias.name.partition(".")[0]
                    found[alias.asname or spelt] = spelt
        return found

    def _bound_once(self, name: str) -> bool:
        return self.bound is not None and self.bound[name] == 1


class _TopLevel:
    """Whether the code an import of the app module runs is of the kinds that cannot change
    the model, the app's settings or the environment (rule 4 of the module's docstring)."""

    def __init__(self, source: _Source, app_name: str, model_module: str, allowed: set[int]):
        self.source = source
        self.app_name = app_name
        self.model_module = model_module
        self.allowed = allowed  # the nodes where the model module's names may appear
        self.imports = source.imports()
        self.model_names = {
            name
            for name, dotted in self.imports.items()
            if dotted == model_module or dotted.rpartition(".")[0] == model_module
        }
        self.top = {_assignment(s)[0] or getattr(s, "name", None): s for s in source.tree.body}

    def plain(self) -> bool:
        for statement in self.source.tree.body:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                if not self._imports_no_project_code(statement):
                    return False
            elif not self._statement(statement):
                return False
        return self._executed_calls_plain()

    def _imports_no_project_code(self, statement: ast.Import | ast.ImportFrom) -> bool:
        if isinstance(statement, ast.ImportFrom):
            dots = "." * statement.level
            module = importlib.util.resolve_name(
                dots + (statement.module or ""), self.source.package
            )
            return module == self.model_module or _not_project_code(module)
        return all(
            a.name == self.model_module or _not_project_code(a.name) for a in statement.names
        )

    def _statement(self, statement: ast.stmt) -> bool:
        """A statement of the top level or of a class's body: of a kind that is allowed."""
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.Pass):
            return True  # what a def runs (decorators, defaults) is checked as executed code
        if isinstance(statement, ast.ClassDef):
            return all(self._statement(s) for s in statement.body)
        if isinstance(statement, ast.Assign):
            return all(isinstance(t, ast.Name) for t in statement.targets)
        if isinstance(statement, ast.AnnAssign):
            return isinstance(statement.target, ast.Name)
        if isinstance(statement, ast.Expr):
            return isinstance(statement.value, ast.Constant | ast.Call)
        return _is_main_block(statement)

    def _executed_calls_plain(self) -> bool:
        """Every call that importing the module makes is plain, and the model module's names
        appear only where they are allowed (``state=``, annotations' subscripts)."""
        for annotation in self._annotations():
            self.allowed.update(id(n) for n in ast.walk(annotation))
        for node in _executed(self.source.tree):
            if isinstance(node, ast.ClassDef):
                # creating a class calls its metaclass and its bases' __init_subclass__
                made_by = [*node.bases, *(k.value for k in node.keywords)]
                if not all(self._plain_callee(b, set()) for b in made_by):
                    return False
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id in self.model_names
                and id(node) not in self.allowed
            ):
                return False
            if isinstance(node, ast.Call) and not self._plain_callee(node.func, set()):
                return False
            decorators = getattr(node, "decorator_list", [])
            if not all(self._plain_callee(d, set()) for d in decorators):
                return False
        return True

    def _annotations(self) -> Iterator[ast.expr]:
        """Annotations and subscripts' slices without calls: reading a name there changes
        nothing."""
        for node in _executed(self.source.tree):
            found: list[ast.expr | None] = []
            if isinstance(node, ast.Subscript):
                found.append(node.slice)
            elif isinstance(node, ast.AnnAssign | ast.arg):
                found.append(node.annotation)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append(node.returns)
            yield from (a for a in found if a is not None and not _calls(a))

    def _plain_callee(self, func: ast.expr, seen: set[str]) -> bool:
        """What is called: the app's methods, an installed package's object, a pure builtin or
        standard-library constructor, or a local class without methods."""
        chain: list[str] = []
        while isinstance(func, ast.Attribute | ast.Call | ast.Subscript):
            if isinstance(func, ast.Attribute):
                chain.insert(0, func.attr)
                func = func.value
            else:
                chain = []
                func = func.func if isinstance(func, ast.Call) else func.value
        if not isinstance(func, ast.Name) or func.id in seen:
            return False
        name = func.id
        if name == self.app_name or name in self.model_names:
            return name == self.app_name  # the app's uses are checked by _app_used_plainly
        if name in self.imports:
            dotted = self.imports[name]
            if _standard(dotted):
                return ".".join([dotted, *chain]) in PURE_STANDARD_CALLS
            return True  # continuum, pydantic or an installed package (checked at its import)
        if self.source.bound is not None and not self.source.bound[name]:
            return name in PURE_BUILTINS
        if not self.source._bound_once(name):
            return False
        bound = self.top.get(name)
        if isinstance(bound, ast.ClassDef):
            return not any(
                isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                for n in ast.walk(bound)
            )
        value = _assignment(bound)[1] if isinstance(bound, ast.stmt) else None
        if value is not None and _is_literal(value):
            return True
        return isinstance(value, ast.Call) and self._plain_callee(value.func, {*seen, name})


def _not_project_code(module: str) -> bool:
    """Whether a module is the standard library, continuum's own or an installed
    distribution's, found without importing it: never the user's project."""
    top = module.partition(".")[0]
    if top in ENVIRONMENT_SETTERS:
        return False
    if _standard(top) or top in LIBRARIES:
        return True
    spec = importlib.util.find_spec(top)
    if spec is None:
        return False
    places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or [])
    return bool(places) and all(
        {"site-packages", "dist-packages"} & set(Path(p).parts) for p in places
    )


def _standard(dotted: str) -> bool:
    return dotted.partition(".")[0] in sys.stdlib_module_names


def _is_main_block(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (no ``else``): its body does not run on import."""
    if not isinstance(statement, ast.If) or statement.orelse:
        return False
    test = statement.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _executed(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes an import of the module evaluates: all but the bodies of functions and
    lambdas and of ``if __name__ == "__main__":`` blocks."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            stack.extend([*node.decorator_list, node.args])
            stack.extend([node.returns] if node.returns else [])
        elif isinstance(node, ast.Lambda):
            stack.append(node.args)
        elif _is_main_block(node) if isinstance(node, ast.stmt) else False:
            continue
        else:
            stack.extend(ast.iter_child_nodes(node))


def _calls(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


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
