"""Control-flow signals. Each is a ``BaseException`` so a user's ``except Exception`` in a task
or step cannot swallow it; only the framework catches them."""

from __future__ import annotations

from typing import Any

from continuum.record import ErrorInfo


class Suspend(BaseException):
    """Unwinds a task function so the worker can save and continue in a fresh invocation."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Fenced(BaseException):
    """Another worker moved the record: this one stops at once and writes nothing more."""


class Abort(BaseException):
    """The task must fail now, whatever the task function would do about it."""

    def __init__(self, error: ErrorInfo) -> None:
        self.error = error
        super().__init__(error.message)


class Preempted(BaseException):
    """Raised inside a preemptible step when the invocation's deadline comes too close."""


class Paused(BaseException):
    """Raised by ``ctx.pause(cursor)``: a cooperative step asks to continue later."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        super().__init__("step paused")
