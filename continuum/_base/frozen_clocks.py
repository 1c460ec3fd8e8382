"""What a frozen clock (freezegun: continuum's virtual clock, or a user's own ``freeze_time``)
needs of a process that has imported continuum.

While freezegun runs, ``datetime.datetime`` and ``datetime.date`` are its subclasses
``FakeDatetime`` and ``FakeDate`` in every loaded module. A pydantic schema first built then
(a model module imported on first use, such as the client's status; a model whose build was
deferred; a TypeAdapter made on first use) resolves a ``datetime`` annotation to the fake, which
pydantic >= 2.14 refuses. And freezegun's start reads every attribute of every loaded module:
Powertools' parser, which continuum's batch utilities import, then imports its lazy ``models``
package, whose event models are built under the fake.

Importing this module (``import continuum`` does, first of all) calls
:func:`prepare_for_frozen_clocks`, so that neither happens in a plain script, in a pytest run
without continuum's plugin, or under continuum's own clock.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

#: Modules that freezegun's start leaves alone: Powertools' parser, whose lazy ``models``
#: package would otherwise be imported whole, under the fake datetime, at each first freeze.
UNFROZEN_MODULES = ("aws_lambda_powertools.utilities.parser",)


def prepare_for_frozen_clocks() -> None:
    """When freezegun is installed: give its fake dates pydantic schemas, and keep its start
    out of :data:`UNFROZEN_MODULES` (both idempotent). Without freezegun nothing can freeze
    the clock, and nothing is imported."""
    if find_spec("freezegun") is None:
        return
    import freezegun

    give_fake_dates_their_schemas()
    freezegun.configure(extend_ignore_list=list(UNFROZEN_MODULES))


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
