"""OpenTelemetry traces of continuum tasks: ``pip install 'continuum-lambda[otel]'``.

One trace per task across all its invocations, whatever process runs them: the trace id and
the ids of the spans that outlive an invocation (the task's root, a step whose attempts span
invocations, a wait) derive from the task id, so every invocation names them alike without
talking to the others. Such a span is emitted once, when it ends, with its true start time
(from the events, which read it from the record). A replayed step emits nothing.

Spans (each with ``continuum.task.id`` and ``continuum.task.name``):

- ``task <task name>``: the root, emitted when the task finishes; it starts when the task was
  created; status ERROR when the task failed. A child task's root hangs under the span of
  the wait that started it, in its parent's trace; a task started by ``client.start`` inside
  a span links to that span.
- ``invocation``: one per invocation, with ``continuum.invocation.first``,
  ``continuum.invocation.number`` and ``continuum.invocation.outcome`` (suspended, waiting,
  succeeded, failed, cancelled, or crashed: reported by the next invocation, which found it
  dead at its claim).
- ``<step name>``: one per live step execution, with ``continuum.step.key``, from its first
  attempt to its last, even across invocations; ``<step name> attempt <n>``: one per
  attempt, under its step and linked to the invocation it ran in.
- ``wait <name>``: one per sleep, callback, signal or child-task wait, for its real duration.
- ``<name>``: a child context, a ``parallel``/``map`` batch and each of its items; the steps
  and waits inside one hang under it.

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
    >>> from continuum.integrations.opentelemetry import Tracing  # doctest: +SKIP
    >>> app.observe(Tracing(tracer_provider=TracerProvider()))  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "continuum.integrations.opentelemetry needs opentelemetry-api and opentelemetry-sdk: "
        "pip install 'continuum-lambda[otel]'"
    ) from exc

from continuum._base.trace_ids import (
    derived_span_id,
    parse_traceparent,
    root_span_id,
    task_trace_id,
    wait_span_id,
)
from continuum._define.events import (
    ContextEnded,
    InvocationEnded,
    InvocationStarted,
    StepEnded,
    StepStarted,
    TaskFinished,
    WaitEnded,
)
from continuum._define.observers import Observer

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["Tracing"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
#: Outcomes of an invocation that end its span with status ERROR.
_FAILED_OUTCOMES = ("failed", "crashed")


class _ChosenIds(IdGenerator):
    """The provider's id generator, except for the next span of this thread when the tracing
    chose its ids (derived from the task id)."""

    def __init__(self, fallback: IdGenerator) -> None:
        self.fallback = fallback
        self.chosen = threading.local()

    def generate_span_id(self) -> int:
        span_id: int | None = getattr(self.chosen, "span_id", None)
        if span_id is None:
            return self.fallback.generate_span_id()
        self.chosen.span_id = None
        return span_id

    def generate_trace_id(self) -> int:
        trace_id: int | None = getattr(self.chosen, "trace_id", None)
        if trace_id is None:
            return self.fallback.generate_trace_id()
        self.chosen.trace_id = None
        return trace_id


@dataclass
class _TaskTrace:
    """What this process knows of one task's trace while an invocation of it runs here."""

    task_id: str
    task_name: str
    trace_id: int
    #: the span the root hangs under (a child task's), and the span the root links to
    root_parent: int | None
    link: SpanContext | None
    invocation: Span | None = None
    #: the root span's id, and the link to this invocation's span (made once)
    root: int = 0
    invocation_link: list[Link] = field(default_factory=list)
    #: the step's first-attempt time and span id by (turn, path + key), and the open attempts
    firsts: dict[tuple[int, str], tuple[float, int]] = field(default_factory=dict)
    attempts: dict[tuple[int, str], Span] = field(default_factory=dict)


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _parent_path(path: str) -> str:
    """The path of the child context that holds the context at ``path`` ("" for the turn)."""
    inner = path.rstrip("/")
    return inner.rpartition("/")[0] + "/" if "/" in inner else ""


def _holder_path(key: str) -> str:
    """The path of the child context that holds the step or wait at ``key`` (path + key)."""
    return key.rpartition("/")[0] + "/" if "/" in key else ""


class Tracing(Observer):
    """An observer that turns continuum's events into OpenTelemetry spans.

    Register it with ``app.observe(Tracing())``; the exporter is the provider's (OTLP, or
    AWS X-Ray through the ADOT Lambda layer). With an SDK ``TracerProvider`` the ids are
    derived from the task id; another provider's tracer chooses its own ids (the spans of
    one invocation still nest, but invocations do not join one trace).

    Args:
        tracer_provider: the provider to trace with; None: the global one (looked up at the
            first event, so that it may be set after the app is built).
        logger: a Powertools ``Logger`` to give ``trace_id`` and ``span_id`` keys while a
            span is open; None: continuum's own (``service="continuum"``).
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, logger: Any = None
    ) -> None:
        self._provider = tracer_provider
        self._tracer: Any = None
        self._ids: _ChosenIds | None = None
        self._tasks: dict[str, _TaskTrace] = {}
        self._lock = threading.Lock()
        self._logger = logger

    # -- the tracer and its spans ------------------------------------------------------------

    def _get_tracer(self) -> Any:
        if self._tracer is None:
            provider = self._provider or trace.get_tracer_provider()
            tracer: Any = provider.get_tracer("continuum")
            fallback = getattr(tracer, "id_generator", None)
            if isinstance(fallback, IdGenerator):
                self._ids = _ChosenIds(fallback)
                tracer.id_generator = self._ids
            self._tracer = tracer
        return self._tracer

    def _start(
        self,
        name: str,
        task: _TaskTrace,
        *,
        start: float,
        parent: int | None,
        span_id: int | None = None,
        attributes: dict[str, Any] | None = None,
        links: list[Link] | None = None,
    ) -> Span:
        """Start a span of ``task``'s trace under span ``parent`` (None: the trace's root),
        with id ``span_id`` when given."""
        tracer = self._get_tracer()
        if parent is not None:
            above = SpanContext(task.trace_id, parent, is_remote=True, trace_flags=_SAMPLED)
            context = trace.set_span_in_context(trace.NonRecordingSpan(above), Context())
        else:
            context = Context()
        ids = self._ids
        if ids is not None:
            ids.chosen.span_id = span_id
            ids.chosen.trace_id = task.trace_id if parent is None else None
        try:
            span: Span = tracer.start_span(
                name,
                context=context,
                kind=SpanKind.INTERNAL,
                attributes={
                    "continuum.task.id": task.task_id,
                    "continuum.task.name": task.task_name,
                    **(attributes or {}),
                },
                links=links or (),
                start_time=_ns(start),
            )
        finally:
            if ids is not None:
                ids.chosen.span_id = ids.chosen.trace_id = None
        return span

    def _emit(
        self,
        name: str,
        task: _TaskTrace,
        *,
        start: float,
        end: float,
        parent: int | None,
        span_id: int | None,
        attributes: dict[str, Any] | None = None,
        error: str | None = None,
        ok: bool | None = None,
        links: list[Link] | None = None,
    ) -> None:
        """Emit a span that is over: it started at ``start`` and ends at ``end``."""
        span = self._start(
            name,
            task,
            start=start,
            parent=parent,
            span_id=span_id,
            attributes=attributes,
            links=links,
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        elif ok:
            span.set_status(Status(StatusCode.OK))
        span.end(end_time=_ns(max(end, start)))

    def _invocation_link(self, task: _TaskTrace) -> list[Link]:
        return task.invocation_link

    def _context_span(self, task: _TaskTrace, turn: int, path: str) -> int:
        """The span of the child context at ``path`` (the root for the turn itself)."""
        if not path:
            return task.root
        return derived_span_id(task.task_id, "context", turn, path)

    def _log_keys(self, span: Span | None) -> None:
        logger = self._logger
        if logger is None:
            from aws_lambda_powertools import Logger

            logger = self._logger = Logger(service="continuum")
        if span is None:
            logger.remove_keys(["trace_id", "span_id"])
            return
        context = span.get_span_context()
        logger.append_keys(trace_id=f"{context.trace_id:032x}", span_id=f"{context.span_id:016x}")

    # -- invocations -------------------------------------------------------------------------

    def invocation_started(self, event: InvocationStarted) -> None:
        parent = parse_traceparent(event.traceparent) if event.parent_id else None
        linked = parse_traceparent(event.traceparent) if not event.parent_id else None
        link = None
        if linked is not None:
            link = SpanContext(linked[0], linked[1], is_remote=True, trace_flags=_SAMPLED)
        task = _TaskTrace(
            task_id=event.task_id,
            task_name=event.task_name,
            trace_id=task_trace_id(event.task_id, event.traceparent if event.parent_id else None),
            root_parent=parent[1] if parent is not None else None,
            link=link,
            root=root_span_id(event.task_id),
        )
        with self._lock:
            self._tasks[event.task_id] = task
        root = task.root
        dead = event.crashed
        if dead is not None:
            self._emit(
                "invocation",
                task,
                start=dead.started_at,
                end=dead.last_seen_at,
                parent=root,
                span_id=derived_span_id(event.task_id, "invocation", dead.number),
                attributes={
                    "continuum.invocation.number": dead.number,
                    "continuum.invocation.first": dead.number == 1,
                    "continuum.invocation.outcome": "crashed",
                    "continuum.invocation.request_id": dead.request_id or "",
                },
                error="its worker died holding the task",
            )
        task.invocation = self._start(
            "invocation",
            task,
            start=event.started_at,
            parent=root,
            span_id=derived_span_id(event.task_id, "invocation", event.number),
            attributes={
                "continuum.invocation.number": event.number,
                "continuum.invocation.first": event.first,
                "continuum.invocation.message": event.message,
                "continuum.invocation.request_id": event.request_id or "",
                "continuum.generation": event.generation,
            },
        )
        task.invocation_link = [
            Link(task.invocation.get_span_context(), {"continuum.link": "invocation"})
        ]
        self._log_keys(task.invocation)

    def invocation_ended(self, event: InvocationEnded) -> None:
        with self._lock:
            task = self._tasks.pop(event.task_id, None)
        if task is None or task.invocation is None:
            return
        for span in task.attempts.values():  # an attempt cut off by a control-flow unwind
            span.end(end_time=_ns(event.ended_at))
        span = task.invocation
        span.set_attribute("continuum.invocation.outcome", event.outcome)
        span.set_attribute("continuum.steps.executed", event.steps_executed)
        span.set_attribute("continuum.steps.replayed", event.steps_replayed)
        if event.outcome in _FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, f"the invocation {event.outcome}"))
        span.end(end_time=_ns(max(event.ended_at, event.started_at)))
        self._log_keys(None)

    def task_finished(self, event: TaskFinished) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        failed = event.status == "failed"
        self._emit(
            f"task {event.task_name}",
            task,
            start=event.created_at,
            end=event.finished_at,
            parent=task.root_parent,
            span_id=root_span_id(event.task_id),
            attributes={"continuum.task.status": event.status},
            error=f"{event.error_type}: {event.error}" if failed else None,
            ok=event.status == "succeeded",
            links=[Link(task.link, {"continuum.link": "caller"})] if task.link else None,
        )

    # -- steps -------------------------------------------------------------------------------

    def _step_span_id(self, task_id: str, turn: int, key: str, first: float) -> int:
        return derived_span_id(task_id, "step", turn, key, repr(first))

    def step_started(self, event: StepStarted) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        key = event.path + event.key
        first = event.first_started_at or event.started_at
        step_span = self._step_span_id(event.task_id, event.turn, key, first)
        task.firsts[event.turn, key] = first, step_span
        span = self._start(
            f"{event.name} attempt {event.attempt}",
            task,
            start=event.started_at,
            parent=step_span,
            attributes={
                "continuum.step.key": key,
                "continuum.step.name": event.name,
                "continuum.attempt.number": event.attempt,
                "continuum.step.replay": event.replay,
            },
            links=self._invocation_link(task),
        )
        task.attempts[event.turn, key] = span
        self._log_keys(span)

    def step_ended(self, event: StepEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        key = event.path + event.key
        span = task.attempts.pop((event.turn, key), None)
        first, step_span = task.firsts.get((event.turn, key), (event.started_at, None))
        if span is not None:
            span.set_attribute("continuum.attempt.outcome", event.outcome)
            if event.outcome in ("failed", "retry"):
                span.set_status(Status(StatusCode.ERROR, f"{event.error_type}: {event.error}"))
            elif event.outcome == "ok":
                span.set_status(Status(StatusCode.OK))
            span.end(end_time=_ns(event.ended_at))
            self._log_keys(task.invocation)
        if event.outcome not in ("ok", "failed"):
            return  # the step goes on: its span is emitted when it ends
        task.firsts.pop((event.turn, key), None)
        if step_span is None:
            step_span = self._step_span_id(event.task_id, event.turn, key, first)
        self._emit(
            event.name,
            task,
            start=first,
            end=event.ended_at,
            parent=self._context_span(task, event.turn, event.path),
            span_id=step_span,
            attributes={
                "continuum.step.key": key,
                "continuum.step.name": event.name,
                "continuum.step.attempts": event.attempt,
                "continuum.step.outcome": event.outcome,
            },
            error=f"{event.error_type}: {event.error}" if event.outcome == "failed" else None,
            ok=event.outcome == "ok",
            links=self._invocation_link(task),
        )

    # -- waits and child contexts ------------------------------------------------------------

    def wait_ended(self, event: WaitEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        self._emit(
            f"wait {event.name}",
            task,
            start=event.started_at,
            end=event.ended_at,
            parent=self._context_span(task, event.turn, _holder_path(event.key)),
            span_id=wait_span_id(event.task_id, event.turn, event.key, event.started_at),
            attributes={
                "continuum.wait.kind": event.kind,
                "continuum.wait.key": event.key,
                "continuum.wait.outcome": event.outcome,
            },
            error=event.error if event.outcome != "ok" else None,
        )

    def context_ended(self, event: ContextEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        name = f"{event.name} {event.index}" if event.kind == "item" else event.name
        self._emit(
            name,
            task,
            start=event.started_at,
            end=event.ended_at,
            parent=self._context_span(task, event.turn, _parent_path(event.path)),
            span_id=self._context_span(task, event.turn, event.path),
            attributes={"continuum.context.kind": event.kind, "continuum.context.path": event.path},
            error=event.error if event.outcome != "ok" else None,
        )
