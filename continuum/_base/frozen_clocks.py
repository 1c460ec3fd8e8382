"""What a frozen clock (freezegun: continuum's virtual clock, or a user's own ``freeze_time``)
needs of a process that has imported continuum.

While freezegun runs, ``datetime.datetime`` and ``datetime.date`` are its subclasses
``FakeDatetime`` and ``FakeDate`` in every loaded module. A pydantic schema first built then
(a model module imported on first use, such as the client's status; a model whose build was
deferred; a TypeAdapter made on first use) resolves a ``datetime`` annotation to the fake, which
pydantic >= 2.14 refuses. And freezegun's start reads every attribute of every loaded module:
Powertools' parser, which continuum's batch utilities import, then imports its lazy ``models``
package, whose event models are built under the fake.

Importing this module (``import continuum`` does, first of all) readies freezegun for both,
in a plain script, in a pytest run without continuum's plugin, or under continuum's own clock:
at once if freezegun is loaded, else as soon as it loads (no clock freezes before). A process
that never imports freezegun, a Lambda function's, imports nothing for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

#: Modules that freezegun's start leaves alone: Powertools' parser, whose lazy ``models``
#: package would otherwise be imported whole, under the fake datetime, at each first freeze.
UNFROZEN_MODULES = ("aws_lambda_powertools.utilities.parser",)


#: What runs once freezegun has loaded, before any clock can freeze.
_WHEN_LOADED: list[Callable[[], None]] = []


def when_freezegun_loads(then: Callable[[], None]) -> None:
    """Run ``then`` now if freezegun is loaded, else as soon as it loads (never, in a process
    that does not import it): what must be ready before a clock freezes."""
    if "freezegun.api" in sys.modules:
        then()
        return
    _WHEN_LOADED.append(then)
    if not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport("freezegun.api", _loaded))


def _loaded() -> None:
    waiting, _WHEN_LOADED[:] = list(_WHEN_LOADED), []
    for then in waiting:
        then()


def prepare_for_frozen_clocks() -> None:
    """Give freezegun's fake dates pydantic schemas, and keep its start out of
    :data:`UNFROZEN_MODULES` (both idempotent): now if freezegun is loaded, else when it loads."""
    when_freezegun_loads(_prepare_freezegun)


def _prepare_freezegun() -> None:
    from freezegun import config

    give_fake_dates_their_schemas()
    config.configure(extend_ignore_list=list(UNFROZEN_MODULES))


class _AfterImport(MetaPathFinder):
    """Runs ``then`` once the module ``name`` has loaded, wherever it is found."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once: the next import of it is a plain one
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Then(spec.loader, self.then)
                return spec
        return None


class _Then(Loader):
    """A module's own loader, then ``then``."""

    def __init__(self, loader: Loader, then: Callable[[], None]) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.then()

    def __getattr__(self, name: str) -> Any:  # the rest (get_source, ...) is the loader's
        return getattr(self.loader, name)


def give_fake_dates_their_schemas() -> None:
    """Let pydantic build schemas for freezegun's ``FakeDatetime`` and ``FakeDate``: the ones of
    the classes they stand for, so that a schema built inside a frozen clock, in continuum's
    modules, in the user's and in libraries', validates and serializes as the real class's.

    pydantic >= 2.14 matches types by identity and refuses the fake; older ones matched it by
    reading ``datetime.datetime`` while it was patched.
    """
    from freezegun.api import FakeDate, FakeDatetime
    from pydantic_core import core_schema

    def datetime_schema(cls: type, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.datetime_schema()

    def date_schema(cls: type, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.date_schema()

    # Each class its own: FakeDatetime subclasses FakeDate, and would inherit the date's.
    FakeDatetime.__get_pydantic_core_schema__ = classmethod(datetime_schema)  # type: ignore[attr-defined]
    FakeDate.__get_pydantic_core_schema__ = classmethod(date_schema)  # type: ignore[attr-defined]


prepare_for_frozen_clocks()
