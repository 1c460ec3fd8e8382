"""The wall clock that continuum reads: ``time.time()``, or the running virtual clock.

Outside the local runtime's virtual clock these are ``time.time()`` and ``datetime.now(UTC)``,
looked up at each call, so a test's own ``freeze_time`` applies. While a virtual clock runs
(``clocks.VirtualTime``) they read it from freezegun's factory directly: the same time that
the task's code reads through freezegun's patched functions, without their walk up the call
stack on every read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

#: The real monotonic clock, kept where freezegun does not patch it (a dict, not a module
#: attribute), so billed durations and run timeouts are wall time even while time is virtual.
_REAL_MONOTONIC: dict[str, Callable[[], float]] = {"monotonic": time.monotonic}


def real_monotonic() -> float:
    """Seconds of the real monotonic clock, whatever virtual clock runs."""
    return _REAL_MONOTONIC["monotonic"]()


class VirtualClock(Protocol):
    """A clock that replaces the wall clock while it runs (``run``): the local runtime's."""

    def now_s(self) -> float: ...

    def now_utc(self) -> datetime: ...


#: The running virtual clocks, innermost last, and the innermost one (None: none runs). Plain
#: module attributes holding clocks, not functions: freezegun replaces functions, in every
#: loaded module, while it runs. ``_top`` is what a read looks at: one attribute read, where
#: indexing the list would raise (and catch) an IndexError on every read of the real clock.
_RUNNING: list[VirtualClock] = []
_top: VirtualClock | None = None
_changing = threading.Lock()


def monotonic_clock() -> Callable[[], float]:
    """The monotonic clock of how long things take in a turn (a turn binds it once): the
    running virtual clock's, read directly (freezegun gives asyncio's callers the real clock
    and others the virtual one, by call depth), else ``time.monotonic`` as now looked up."""
    source = _top
    return time.monotonic if source is None else source.now_s


def now_s() -> float:
    """Epoch seconds now."""
    source = _top
    return time.time() if source is None else source.now_s()


def utcnow() -> datetime:
    """Now, as an aware UTC datetime."""
    source = _top
    return datetime.now(UTC) if source is None else source.now_utc()


def sleep(seconds: float) -> None:
    """Wait ``seconds`` (a retry's backoff, a short sleep): on the running virtual clock, a
    jump of it (a test does not wait in real time for what it reads as virtual); else
    ``time.sleep``."""
    advance = getattr(_top, "advance", None)
    if advance is None:
        time.sleep(seconds)
    else:
        advance(seconds)


async def sleep_async(seconds: float) -> None:
    """``sleep``, awaited: a jump of the running virtual clock, else ``asyncio.sleep``."""
    import asyncio

    advance = getattr(_top, "advance", None)
    if advance is None:
        await asyncio.sleep(seconds)
    else:
        advance(seconds)
        await asyncio.sleep(0)


def run(source: VirtualClock) -> None:
    """``source`` is the clock from now on (until :func:`stop`)."""
    global _top
    with _changing:
        _RUNNING.append(source)
        _top = source


def stop(source: VirtualClock) -> None:
    global _top
    with _changing:
        if source in _RUNNING:
            _RUNNING.remove(source)
        _top = _RUNNING[-1] if _RUNNING else None
