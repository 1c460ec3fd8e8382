"""Where an invocation keeps its event loop: the worker opens the slot around the handler, the
first async turn fills it (``event_loop``), and closing the slot closes the loop.

Nothing here imports asyncio: the worker of a sync app never loads the event loop's code.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

# Protocols for type checkers only: each class built at import costs the cold start about half
# a million instructions (benchmarks.versus), and nothing checks them at run time.
if TYPE_CHECKING:
    from typing import Protocol

    class Closable(Protocol):
        def close(self) -> None: ...


class _Slot(threading.local):
    opened = False
    loop: Closable | None = None


_slot = _Slot()


@contextmanager
def invocation_loop() -> Iterator[None]:
    """An invocation of the handler: the async turns inside it share one event loop, made on
    first use and closed when the invocation ends."""
    if _slot.opened:  # already inside one (a runner nested in a test's invocation)
        yield
        return
    _slot.opened, _slot.loop = True, None
    try:
        yield
    finally:
        loop, _slot.opened, _slot.loop = _slot.loop, False, None
        if loop is not None:
            loop.close()


def opened() -> bool:
    """Whether an invocation's slot is open in this thread."""
    return _slot.opened


def current() -> Closable | None:
    """The invocation's event loop holder, if an async turn made one."""
    return _slot.loop


def fill(loop: Closable) -> None:
    """Keep ``loop`` as the invocation's, closed with it."""
    _slot.loop = loop
