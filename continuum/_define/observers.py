"""Observers: hooks on what a worker does, for logs, metrics and traces of your own.

Register any number with ``app.observe(observer)``. Each is a :class:`Observer` subclass that
overrides the events it wants; they are called in order, on the worker's thread. An observer
that raises is logged and skipped: it never breaks the task. Step events are the hot path:
they cost nothing unless an observer overrides them.

Example (OpenTelemetry; ``tracer`` is yours):
    >>> class Spans(Observer):
    ...     def step_started(self, event):
    ...         self.span = tracer.start_span(event.key, attributes={"task": event.task_id})
    ...     def step_ended(self, event):
    ...         self.span.set_attribute("outcome", event.outcome)
    ...         self.span.end()
    >>> app.observe(Spans())  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("continuum._define.observers")


@dataclass(frozen=True)
class InvocationStarted:
    """A worker claimed the task: an invocation of it begins."""

    task_id: str
    task_name: str
    generation: int
    turn: int
    #: the message's kind: start, continue, timer, wake
    message: str
    #: this is the first invocation of this task
    first: bool


@dataclass(frozen=True)
class InvocationEnded:
    """The invocation's hold on the task ended (``outcome``: the worker's outcome)."""

    task_id: str
    task_name: str
    outcome: str
    duration_s: float
    steps_executed: int
    steps_replayed: int


@dataclass(frozen=True)
class StepStarted:
    """An attempt of a live step starts (replayed steps send no events)."""

    task_id: str
    key: str
    name: str
    turn: int
    attempt: int


@dataclass(frozen=True)
class StepEnded:
    """An attempt of a live step ended: ``ok``, ``failed``, ``retry``, ``paused`` or
    ``preempted``; ``error_type`` names what it raised."""

    task_id: str
    key: str
    name: str
    turn: int
    attempt: int
    outcome: str
    duration_s: float
    error_type: str | None = None


@dataclass(frozen=True)
class TaskParked:
    """The task suspended (continues in a fresh invocation) or went waiting."""

    task_id: str
    task_name: str
    status: str
    generation: int
    reason: str


@dataclass(frozen=True)
class TaskFinished:
    """The task finished: succeeded, failed or cancelled."""

    task_id: str
    task_name: str
    status: str
    error_type: str | None
    error: str | None


@dataclass(frozen=True)
class MessageHandled:
    """A worker handled one message (``outcome``: suspended, stale, duplicate, ...)."""

    outcome: str
    task_name: str | None
    duration_ms: float
    #: the task the message names (None if the message could not be read).
    task_id: str | None = None


class Observer:
    """Override the events you want; the rest do nothing."""

    def message_handled(self, event: MessageHandled) -> None:
        """A worker handled one message, whatever it did with it."""

    def batch_done(self, event: None) -> None:
        """A worker handled a whole SQS batch (flush what you buffer)."""

    def invocation_started(self, event: InvocationStarted) -> None:
        """A worker claimed the task."""

    def invocation_ended(self, event: InvocationEnded) -> None:
        """The worker's hold on the task ended."""

    def step_started(self, event: StepStarted) -> None:
        """An attempt of a live step starts."""

    def step_ended(self, event: StepEnded) -> None:
        """An attempt of a live step ended."""

    def task_parked(self, event: TaskParked) -> None:
        """The task suspended or went waiting."""

    def task_finished(self, event: TaskFinished) -> None:
        """The task finished."""


_STEP_EVENTS = ("step_started", "step_ended")


class Observers:
    """The registered observers, called in order; one that raises is logged and skipped.

    Args:
        then: observers to call after these (a worker's own, then its app's), including
            those registered there later.
    """

    def __init__(self, *, then: Observers | None = None) -> None:
        self._observers: list[Observer] = []
        self._then = then
        self._steps = False

    @property
    def steps(self) -> bool:
        """Whether any observer wants step events (else the step path skips them)."""
        return self._steps or (self._then is not None and self._then.steps)

    def add(self, observer: Observer) -> None:
        if not isinstance(observer, Observer):
            from continuum.errors import ConfigurationError

            raise ConfigurationError(
                f"an observer must be a continuum.Observer, got {type(observer).__name__}"
            )
        self._observers.append(observer)
        self._steps = self._steps or any(
            getattr(type(observer), name) is not getattr(Observer, name) for name in _STEP_EVENTS
        )

    def emit(self, event_name: str, event: Any) -> None:
        for observer in self._observers:
            method: Callable[[Any], None] = getattr(observer, event_name)
            try:
                method(event)
            except Exception as exc:  # an observer never breaks the task
                logger.warning(
                    "observer %s raised in %s: %s: %s",
                    type(observer).__name__,
                    event_name,
                    type(exc).__name__,
                    exc,
                )
        if self._then is not None:
            self._then.emit(event_name, event)
