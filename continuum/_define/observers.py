"""Observers: hooks on what a worker does, for logs, metrics and traces of your own.

Register any number with ``app.observe(observer)``. Each is a :class:`Observer` subclass that
overrides the events it wants; they are called in order, on the thread where the event
happened: the worker's for the turn's own steps, a pool thread for the steps of an item of
``ctx.map`` or a branch of ``ctx.parallel`` (several at once), so an observer keeps what it
holds per event keyed by the event (``task_id``, ``path``, ``key``), not in one attribute. An
observer that raises is logged and skipped: it never breaks the task. Step, wait and context events
are the turn's hot path: they cost nothing unless an observer overrides one of them.
``continuum.integrations.opentelemetry.Tracing`` is an observer built on these events alone.

Times are epoch seconds of the clock continuum reads (the virtual clock where one runs).

Example (OpenTelemetry; ``tracer`` is yours):
    >>> class Spans(Observer):
    ...     def __init__(self):
    ...         self.spans = {}  # by step: the steps of ctx.map items run at the same time
    ...     def step_started(self, event):
    ...         span = tracer.start_span(event.path + event.key)
    ...         self.spans[event.task_id, event.path, event.key] = span
    ...     def step_ended(self, event):
    ...         span = self.spans.pop((event.task_id, event.path, event.key))
    ...         span.set_attribute("outcome", event.outcome)
    ...         span.end()
    >>> app.observe(Spans())  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from continuum._define.events import (
        ContextEnded,
        ContextEntered,
        ContextStarted,
        InvocationEnded,
        InvocationStarted,
        OperationEnded,
        OperationsSaved,
        OperationStarted,
        StepEnded,
        StepStarted,
        TaskFinished,
        TaskParked,
        WaitEnded,
        WaitStarted,
    )

logger = logging.getLogger("continuum._define.observers")


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

    def wait_started(self, event: WaitStarted) -> None:
        """A wait was first reached."""

    def wait_ended(self, event: WaitEnded) -> None:
        """A wait was answered."""

    def context_started(self, event: ContextStarted) -> None:
        """A child context, a batch or one of its items was first reached."""

    def context_ended(self, event: ContextEnded) -> None:
        """A child context, a batch or one of its items finished."""

    def context_entered(self, event: ContextEntered) -> None:
        """A child context's function begins a run, live or replaying what it recorded."""

    def operation_started(self, event: OperationStarted) -> None:
        """An operation made of others (``wait_for_callback``) is entered, live or replayed."""

    def operation_ended(self, event: OperationEnded) -> None:
        """An operation made of others returned or raised, live or replayed."""

    def operations_saved(self, event: OperationsSaved) -> None:
        """A write of the record changed the operations it holds (which, and all of them)."""

    def task_parked(self, event: TaskParked) -> None:
        """The task suspended or went waiting."""

    def task_finished(self, event: TaskFinished) -> None:
        """The task finished."""


#: The events of a turn's inside: the turn calls observers for them only when one wants them.
_STEP_EVENTS = (
    "step_started",
    "step_ended",
    "wait_started",
    "wait_ended",
    "context_started",
    "context_ended",
    "context_entered",
    "operation_started",
    "operation_ended",
    "operations_saved",  # a wait's entry then keeps when it was reached
)


class Observers:
    """The registered observers, called in order; one that raises is logged and skipped.

    Args:
        then: observers to call after these (a worker's own, then its app's), including
            those registered there later.
    """

    def __init__(self, *, then: Observers | None = None) -> None:
        self._observers: list[Observer] = []
        self._then = then
        self._wanted: set[str] = set()

    @property
    def steps(self) -> bool:
        """Whether any observer wants step, wait or context events (else the turn skips
        them)."""
        return any(self.wants(name) for name in _STEP_EVENTS)

    def wants(self, event_name: str) -> bool:
        """Whether any observer overrides ``event_name`` (else its event need not be built)."""
        return event_name in self._wanted or (
            self._then is not None and self._then.wants(event_name)
        )

    def add(self, observer: Observer) -> None:
        if not isinstance(observer, Observer):
            from continuum.errors import ConfigurationError

            raise ConfigurationError(
                f"an observer must be a continuum.Observer, got {type(observer).__name__}"
            )
        self._observers.append(observer)
        hooks = (name for name in vars(Observer) if not name.startswith("_"))
        self._wanted.update(
            name for name in hooks if getattr(type(observer), name) is not getattr(Observer, name)
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
