"""Clocks for the fakes (time that moves only when a test says so), and their ids."""

from __future__ import annotations

import os
from collections.abc import Callable

from continuum._base.clock import now_s

#: Returns epoch seconds.
Clock = Callable[[], float]
#: A fault hook: called with an operation's name and its key before it runs; raise to fail it.
Hook = Callable[[str, str], None]


def wall_clock() -> float:
    """``time.time()``, looked up at each call (so a frozen or virtual clock applies)."""
    return now_s()


class ManualClock:
    """A clock that moves only when told: ``clock.advance(30)``."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def new_id() -> str:
    """A random id of 32 hex digits, as ``uuid.uuid4().hex`` but cheaper (the fakes make
    several per message)."""
    return os.urandom(16).hex()
