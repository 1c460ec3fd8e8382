"""Control flow: the framework's own exceptions.

Each is a ``BaseException`` so a user's ``except Exception`` in a task or step cannot swallow
it; only the framework catches them. A bare ``except:`` can: the turn loop notices (the
exception is remembered when raised) and fails the task saying so.
"""

from __future__ import annotations

from typing import Any

from continuum._record.model import ErrorInfo
from continuum._record.waiting_for import Waiter


class ControlFlow(BaseException):
    """The parent of the framework's control-flow exceptions."""


class Suspend(ControlFlow):
    """Unwinds a task function so the worker can save and continue in a fresh invocation."""

    def __init__(self, reason: str, *, delay_s: float = 0.0) -> None:
        self.reason = reason
        self.delay_s = delay_s
        super().__init__(reason)


class Wait(ControlFlow):
    """Unwinds a task function that waits: the worker writes the record ``waiting``."""

    def __init__(self, waiters: list[Waiter], reason: str) -> None:
        self.waiters = waiters
        self.reason = reason
        super().__init__(reason)


class Fenced(ControlFlow):
    """Another worker moved the record: this one stops at once and writes nothing more."""


class Abort(ControlFlow):
    """The task must fail now, whatever the task function would do about it."""

    def __init__(self, error: ErrorInfo) -> None:
        self.error = error
        super().__init__(error.message)


class Preempted(ControlFlow):
    """Raised inside a preemptible step when the invocation's deadline comes too close."""


class Paused(ControlFlow):
    """Raised by ``ctx.pause(cursor)``: a cooperative step asks to continue later."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        super().__init__("step paused")
