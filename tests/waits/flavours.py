"""The two flavours a waits test runs its task in: ``sync`` (``def``) and ``async``
(``async def``).

A test that takes the ``flavour`` fixture runs once per flavour. Its app factory writes the
task twice, a sync body and its async twin, and registers the one of the flavour under the
sync body's name; its steps go through ``flavour.step``, so in the async flavour they are
``async def`` steps the twin awaits. The journal keys, the records and every assertion are the
same in both flavours::

    def nap(ctx):
        note("before")
        ctx.sleep(60)
        return note("after")

    async def nap_async(ctx):
        await note("before")
        await ctx.sleep_async(60)
        return await note("after")

    flavour.task(app, nap, nap_async, state=Nap)
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from continuum import Continuum

#: The flavours, as the ``flavour`` fixture's parameters (``tests/waits/conftest.py``).
FLAVOURS = ("sync", "async")


@dataclass(frozen=True)
class Flavour:
    """Which of a task's twins a test registers: ``sync`` or ``async``."""

    name: str

    @property
    def is_async(self) -> bool:
        return self.name == "async"

    def task(
        self,
        app: Continuum,
        sync: Callable[..., Any],
        async_: Callable[..., Coroutine[Any, Any, Any]],
        **options: Any,
    ) -> Any:
        """Register the flavour's twin as the task named after ``sync`` (``app.task``'s
        options, e.g. ``state=``, apply to it)."""
        options.setdefault("name", sync.__name__)
        return app.task(**options)(async_ if self.is_async else sync)

    def step(self, app: Continuum, **options: Any) -> Callable[[Callable[..., Any]], Any]:
        """A decorator like ``app.step(**options)``: in the async flavour the step is an
        ``async def`` of the same name that yields to the event loop, then runs the body."""

        def decorate(fn: Callable[..., Any]) -> Any:
            if not self.is_async:
                return app.step(**options)(fn)

            @functools.wraps(fn)
            async def awaited(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(0)  # a real await point: the loop may run other tasks
                return fn(*args, **kwargs)

            return app.step(**options)(awaited)

        return decorate
