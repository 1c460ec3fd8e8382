"""Sync and async twins of a test's task, so that one test body proves a guarantee for both.

A test takes ``flavour`` (``@pytest.mark.parametrize("flavour", FLAVOURS)``) and builds its
app with it: the app factory defines the ``def`` task (and steps, items, branches) for
``"sync"`` and the ``async def`` twin (``await``-ed steps, the ``_async`` fan-out and waits)
for ``"async"``, doing the same work in the same order, so every assertion holds for both.
"""

from __future__ import annotations

FLAVOURS = ("sync", "async")
