"""The wall clock that continuum reads: ``time.time()``, or the running virtual clock.

Outside the local runtime's virtual clock these are ``time.time()`` and ``datetime.now(UTC)``,
looked up at each call, so a test's own ``freeze_time`` applies. While a virtual clock runs
(``clocks.VirtualTime``) they read it from freezegun's factory directly: the same time that
the task's code reads through freezegun's patched functions, without their walk up the call
stack on every read (a few microseconds each; a timer hop made about fifteen).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Source(Protocol):
    def now_s(self) -> float: ...

    def now_utc(self) -> datetime: ...


#: The running virtual clocks, innermost last. A list, not a module attribute holding a
#: function: freezegun replaces those, in every loaded module, while it runs.
_RUNNING: list[Source] = []


def _running() -> Source | None:
    try:
        return _RUNNING[-1]
    except IndexError:  # none runs (or another thread stopped the last one just now)
        return None


def now_s() -> float:
    """Epoch seconds now."""
    source = _running()
    return time.time() if source is None else source.now_s()


def utcnow() -> datetime:
    """Now, as an aware UTC datetime."""
    source = _running()
    return datetime.now(UTC) if source is None else source.now_utc()


def run(source: Source) -> None:
    """``source`` is the clock from now on (until :func:`stop`)."""
    _RUNNING.append(source)


def stop(source: Source) -> None:
    if source in _RUNNING:
        _RUNNING.remove(source)
