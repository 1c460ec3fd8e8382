"""OpenTelemetry traces of continuum tasks: ``pip install 'continuum-lambda[otel]'``.

One trace per task across all its invocations, whatever process runs them: the trace id and
the ids of the spans that outlive an invocation (the task's root, a step whose attempts span
invocations, a wait, a child context) derive from the task's stack (bucket and prefix) and
id, so every invocation names them alike without talking to the others. Such a span is sent
once, when it ends and a write of the record holds what it ended (``operations_saved``, or the
invocation's end; never by a worker fenced at its end), with its true start time (from the
events, which read it from the record); a replayed step, wait or context sends nothing. What
is still open when an invocation ends (a wait, a step whose retry waits) is sent as a span of
that invocation with status UNSET.

When the provider's pipeline cannot tell when a span was made (the SDK's own samplers, and only
its export processors), only the invocation's span is open in the SDK while the task runs: a
step's attempt, and every span that ended, is kept as plain values (``_Later``) and made on the
tracer, started and ended at once, when a write of the record holds it; the attempt's span id
is chosen as it starts, so that log lines name it. Any other sampler or processor (one that
reads the thread or the context at ``on_start``), or a tracer that chooses its own ids, gets
each span started where and when it starts, as made live. An attempt's outcome is set after it
starts either way: a sampler decides on what the attempt starts with.

Two vocabularies name the spans and their attributes (docs/tracing.md lists every one):
``naming="continuum"`` (the default: ``task <name>``, ``invocation``, ``continuum.*``) and
``naming="aws"`` (AWS Lambda durable functions' model: ``Workflow``, ``Invocation``,
``durable.*``), for dashboards built on the latter.

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
    >>> from continuum.integrations.opentelemetry import Tracing  # doctest: +SKIP
    >>> app.observe(Tracing(tracer_provider=TracerProvider()))  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor, SynchronousMultiSpanProcessor
    from opentelemetry.sdk.trace import sampling as _sampling
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "continuum.integrations.opentelemetry needs opentelemetry-api and opentelemetry-sdk: "
        "pip install 'continuum-lambda[otel]'"
    ) from exc

from continuum._base.trace_ids import (
    parse_traceparent,
    root_span_id,
    run_span_id,
    task_trace_id,
    wait_span_id,
)
from continuum._define.events import (
    ContextEnded,
    ContextStarted,
    InvocationEnded,
    InvocationStarted,
    OperationEnded,
    OperationsSaved,
    OperationStarted,
    StepEnded,
    StepStarted,
    TaskFinished,
    WaitEnded,
    WaitStarted,
)
from continuum._define.observers import Observer
from continuum._waits.kinds import registry
from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["Tracing"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_OK = Status(StatusCode.OK)
#: Outcomes of an invocation that end its span with status ERROR.
_FAILED_OUTCOMES = ("failed", "crashed")
#: What an open wait of the record is, by its journal kind: its kind of wait (the registry's
#: own table, so a kind added there is resumed here); an open ``step`` is a step.
_OPEN_KINDS = registry.BY_ENTRY
#: The statuses of an operation the record holds that its next invocation goes on with.
_OPEN_STATUSES = ("started", "pending")
#: Outcomes of a wait, context or operation that end its span with no status (UNSET).
_UNSET_OUTCOMES = ("cancelled", "abandoned")
#: The outcome of an invocation whose record another worker took meanwhile.
_FENCED = "fenced"
Naming = Literal["continuum", "aws"]
#: The SDK's span processors that do nothing at a span's start (they export at its end).
_EXPORT_ONLY = (SimpleSpanProcessor, BatchSpanProcessor)
_MULTI_PROCESSORS = (SynchronousMultiSpanProcessor, ConcurrentMultiSpanProcessor)


def _samples_on_its_arguments(sampler: object) -> bool:
    """The SDK's own samplers (and their delegates) decide on what ``start_span`` passes them
    alone, not on the thread or the moment it is called."""
    if type(sampler).__module__ != _sampling.__name__:
        return False
    delegates = getattr(sampler, "__dict__", {}).values()
    return all(_samples_on_its_arguments(s) for s in delegates if isinstance(s, _sampling.Sampler))


def _cannot_tell_when_made(tracer: Any) -> bool:
    """Whether ``tracer``'s sampler and span processors export the same spans whenever and in
    whichever thread they are made: then they may be made when a write holds them."""
    multi = getattr(tracer, "span_processor", None)
    if type(multi) not in _MULTI_PROCESSORS:
        return False
    processors = getattr(multi, "_span_processors", None)
    return (
        isinstance(processors, tuple)
        and all(type(p) in _EXPORT_ONLY for p in processors)
        and _samples_on_its_arguments(getattr(tracer, "sampler", None))
    )


class _ChosenIds(IdGenerator):
    """The provider's id generator, except for the next span of this thread when the tracing
    chose its ids (derived from the task)."""

    def __init__(self, fallback: IdGenerator) -> None:
        self.fallback = fallback
        self.chosen = threading.local()

    def generate_span_id(self) -> int:
        chosen = self.chosen
        span_id: int | None = getattr(chosen, "span_id", None)
        if span_id is None:
            return self.fallback.generate_span_id()
        chosen.span_id = None
        return span_id

    def generate_trace_id(self) -> int:
        chosen = self.chosen
        trace_id: int | None = getattr(chosen, "trace_id", None)
        if trace_id is None:
            return self.fallback.generate_trace_id()
        chosen.trace_id = None
        return trace_id


# -- the two vocabularies ----------------------------------------------------------------------

#: AWS's operation type and subtype of the waits that are no kind of wait (each kind says its
#: own, ``WaitOperation.aws_type``): a condition is a loop of steps and sleeps.
_AWS_WAIT_TYPES = {"condition": ("STEP", "WaitForCondition")}
_AWS_CONTEXT_TYPES = {"context": "RunInChildContext", "batch": "Parallel", "item": "Iteration"}
#: AWS's status words for continuum's outcomes (of a task, an invocation, an operation).
_AWS_STATUS = {
    "succeeded": "SUCCEEDED",
    "failed": "FAILED",
    "cancelled": "STOPPED",
    "suspended": "PENDING",
    "waiting": "PENDING",
    "crashed": "FAILED",
    "ok": "SUCCEEDED",
    "timeout": "TIMED_OUT",
    "retry": "FAILED",
    "paused": "STARTED",
    "preempted": "STARTED",
    "started": "STARTED",
    "abandoned": "CANCELLED",  # an item its batch no longer needs, and the waits it was in
}


class _Vocabulary:
    """Names and attributes of continuum's own model."""

    root_prefix = "task "
    invocation = "invocation"

    def common(self, stack: str, task_id: str, task_name: str) -> dict[str, Any]:
        return {"continuum.task.id": task_id, "continuum.task.name": task_name}

    def root_name(self, task_name: str) -> str:
        return f"task {task_name}"

    def root(self, status: str, retries: int) -> dict[str, Any]:
        return {"continuum.task.status": status, "continuum.task.retries": retries}

    def invocation_start(self, event: InvocationStarted) -> dict[str, Any]:
        return {
            "continuum.invocation.number": event.number,
            "continuum.invocation.first": event.first,
            "continuum.invocation.message": event.message,
            "continuum.invocation.request_id": event.request_id or "",
            "continuum.generation": event.generation,
        }

    def invocation_end(self, outcome: str, executed: int, replayed: int) -> dict[str, Any]:
        return {
            "continuum.invocation.outcome": outcome,
            "continuum.steps.executed": executed,
            "continuum.steps.replayed": replayed,
        }

    def crashed(self, number: int, request_id: str | None) -> dict[str, Any]:
        return {
            "continuum.invocation.number": number,
            "continuum.invocation.first": number == 1,
            "continuum.invocation.request_id": request_id or "",
            "continuum.invocation.outcome": "crashed",
        }

    def link(self, request_id: str | None) -> dict[str, Any]:
        return {"continuum.link": "invocation"}

    def step(self, key: str, name: str, attempts: int, outcome: str) -> dict[str, Any]:
        return {
            "continuum.step.key": key,
            "continuum.step.name": name,
            "continuum.step.attempts": attempts,
            "continuum.step.outcome": outcome,
        }

    def attempt(self, key: str, name: str, number: int, replay: bool) -> dict[str, Any]:
        return {
            "continuum.step.key": key,
            "continuum.step.name": name,
            "continuum.attempt.number": number,
            "continuum.step.replay": replay,
        }

    def attempt_outcome(self, outcome: str) -> tuple[str, str]:
        return "continuum.attempt.outcome", outcome

    def wait_name(self, name: str) -> str:
        return f"wait {name}"

    def wait(self, kind: str, key: str, name: str, outcome: str) -> dict[str, Any]:
        return {
            "continuum.wait.kind": kind,
            "continuum.wait.key": key,
            "continuum.wait.outcome": outcome,
        }

    def operation_name(self, kind: str, name: str) -> str:
        return f"{kind} {name}"

    def operation(self, kind: str, key: str, name: str, outcome: str) -> dict[str, Any]:
        return {
            "continuum.operation.kind": kind,
            "continuum.operation.key": key,
            "continuum.operation.outcome": outcome,
        }

    def context(self, kind: str, path: str, name: str, outcome: str) -> dict[str, Any]:
        return {
            "continuum.context.kind": kind,
            "continuum.context.path": path,
            "continuum.context.outcome": outcome,
        }


class _AwsVocabulary(_Vocabulary):
    """Names and attributes of AWS Lambda durable functions' OpenTelemetry model."""

    invocation = "Invocation"

    def common(self, stack: str, task_id: str, task_name: str) -> dict[str, Any]:
        return {"durable.execution.arn": f"{stack}/{task_id}"}

    def root_name(self, task_name: str) -> str:
        return "Workflow"

    def root(self, status: str, retries: int) -> dict[str, Any]:
        return {"durable.execution.status": _AWS_STATUS.get(status, status.upper())}

    def invocation_start(self, event: InvocationStarted) -> dict[str, Any]:
        return {"durable.invocation.first": event.first}

    def invocation_end(self, outcome: str, executed: int, replayed: int) -> dict[str, Any]:
        return {"durable.invocation.status": _AWS_STATUS.get(outcome, outcome.upper())}

    def crashed(self, number: int, request_id: str | None) -> dict[str, Any]:
        return {"durable.invocation.first": number == 1, "durable.invocation.status": "FAILED"}

    def link(self, request_id: str | None) -> dict[str, Any]:
        return {"faas.invocation_id": request_id or ""}

    def step(self, key: str, name: str, attempts: int, outcome: str) -> dict[str, Any]:
        return {
            "durable.operation.id": key,
            "durable.operation.type": "STEP",
            "durable.operation.subtype": "Step",
            "durable.operation.name": name,
            "durable.operation.status": _AWS_STATUS.get(outcome, outcome.upper()),
            "durable.attempt.number": attempts,
        }

    def attempt(self, key: str, name: str, number: int, replay: bool) -> dict[str, Any]:
        return {
            "durable.operation.id": key,
            "durable.operation.type": "STEP",
            "durable.operation.subtype": "Step",
            "durable.operation.name": name,
            "durable.attempt.number": number,
        }

    def attempt_outcome(self, outcome: str) -> tuple[str, str]:
        return "durable.attempt.outcome", _AWS_STATUS.get(outcome, outcome.upper())

    def wait_name(self, name: str) -> str:
        return name

    def wait(self, kind: str, key: str, name: str, outcome: str) -> dict[str, Any]:
        wait = registry.BY_EVENT.get(kind)
        kind_type, subtype = wait.aws_type if wait else _AWS_WAIT_TYPES.get(kind, ("WAIT", kind))
        return {
            "durable.operation.id": key,
            "durable.operation.type": kind_type,
            "durable.operation.subtype": subtype,
            "durable.operation.name": name,
            "durable.operation.status": _AWS_STATUS.get(outcome, outcome.upper()),
        }

    def operation_name(self, kind: str, name: str) -> str:
        return name

    def operation(self, kind: str, key: str, name: str, outcome: str) -> dict[str, Any]:
        return {
            "durable.operation.id": key,
            "durable.operation.type": "CONTEXT",
            "durable.operation.subtype": "WaitForCallback",
            "durable.operation.name": name,
            "durable.operation.status": _AWS_STATUS.get(outcome, outcome.upper()),
        }

    def context(self, kind: str, path: str, name: str, outcome: str) -> dict[str, Any]:
        return {
            "durable.operation.id": path.rstrip("/"),
            "durable.operation.type": "CONTEXT",
            "durable.operation.subtype": _AWS_CONTEXT_TYPES.get(kind, kind),
            "durable.operation.name": name,
            "durable.operation.status": _AWS_STATUS.get(outcome, outcome.upper()),
        }


_VOCABULARIES: dict[str, _Vocabulary] = {"continuum": _Vocabulary(), "aws": _AwsVocabulary()}


# -- one task's trace in this process ----------------------------------------------------------


@dataclass(slots=True)
class _Later:
    """A span that ended (or an attempt that runs), made on the SDK only when a write of the
    record holds what it ended: nothing lives in the SDK meanwhile, and the spans a write
    holds are made one after the other."""

    name: str
    start: float
    end: float
    #: the span it hangs under (None: the trace's root), and its own id when chosen
    parent: int | None
    span_id: int | None
    attributes: dict[str, Any]
    links: list[Link] | None
    status: Status | None = None
    #: the span already started, where its pipeline could tell when it was made
    span: Span | None = None
    #: an attempt's outcome, set after it starts (a sampler is not offered it)
    outcome: tuple[str, str] | None = None


@dataclass
class _Group:
    """An operation made of others (``wait_for_callback``) open in this invocation."""

    span_id: int
    started: OperationStarted
    #: something ended inside it in this invocation (else it is a replay of one that ended)
    touched: bool = False


@dataclass
class _TaskTrace:
    """What this process knows of one task's trace while an invocation of it runs here."""

    stack: str
    task_id: str
    trace_id: int
    #: the attributes every span of the task carries
    common: dict[str, Any]
    #: the root span's id in this run of the task, the span it hangs under (a child task's),
    #: and what it links to (the caller's span, the root of the run a retry followed)
    root: int
    root_parent: int | None
    root_links: list[Link]
    #: when the task was created (or its first invocation started, if earlier)
    created_at: float
    invocation: Span | None = None
    #: the invocation span's trace and span ids (for the log keys)
    invocation_ids: tuple[int, int] | None = None
    #: when this invocation claimed the task: what is open in it starts no earlier
    invocation_started: float = 0.0
    invocation_number: int = 0
    invocation_links: list[Link] = field(default_factory=list)
    #: the root's context, made once: the parent handed to the SDK
    parents: dict[int, Context] = field(default_factory=dict)
    #: the step's first-attempt time, span id and name by (turn, path + key), and open attempts
    firsts: dict[tuple[int, str], tuple[float, int, str, int]] = field(default_factory=dict)
    attempts: dict[tuple[int, str], _Later] = field(default_factory=dict)
    #: waits reached and not answered in this invocation, by (turn, key)
    waits: dict[tuple[int, str], WaitStarted] = field(default_factory=dict)
    #: waits and steps the record held open at its last write (some reached, or retried,
    #: in an earlier invocation), by (turn, key): (kind, name, since, attempts)
    saved_open: dict[tuple[int, str], tuple[str, str, float, int]] = field(default_factory=dict)
    #: child contexts started in this invocation and not ended, by (turn, path)
    contexts: dict[tuple[int, str], ContextStarted] = field(default_factory=dict)
    #: operations made of others entered in this invocation, by (turn, their context's path)
    groups: dict[tuple[int, str], _Group] = field(default_factory=dict)
    #: the task finished in this invocation: its root, sent when the invocation ends
    finished: TaskFinished | None = None
    #: times ``client.retry`` ran the task again: every span id names its run
    retries: int = 0
    #: the Lambda request id of the invocation that runs here (the lease's owner)
    request_id: str | None = None
    #: spans start as they start (the pipeline could tell), else when a write holds them
    live: bool = True
    #: spans that ended, made and sent when a write of the record holds them: a worker
    #: that dies before it sends none of what its redo sends again
    held: deque[_Later] = field(default_factory=deque)

    def span_id(self, *names: object) -> int:
        """The id of the span ``names`` name in this run of the task."""
        return run_span_id(self.stack, self.task_id, self.retries, *names)


def _status_of(outcome: str, error: str | None) -> Status | None:
    """The status of a wait, context or operation that ended with ``outcome``: none (UNSET)
    for one a cancel ended, as for a cancelled task's root, or one its batch no longer needed
    (it neither succeeded nor failed)."""
    if outcome == "ok":
        return _OK
    if outcome in _UNSET_OUTCOMES:
        return None
    return Status(StatusCode.ERROR, error or outcome)


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
    derived from the task's stack and id; another provider's tracer chooses its own ids (the
    spans of one invocation still nest, but invocations do not join one trace).

    Args:
        tracer_provider: the provider to trace with; None: the global one (looked up at the
            first event, so that it may be set after the app is built).
        logger: a Powertools ``Logger`` to give ``trace_id`` and ``span_id`` keys while a
            span is open; None: continuum's own (``service="continuum"``).
        naming: ``"continuum"`` (continuum's span names and ``continuum.*`` attributes) or
            ``"aws"`` (AWS durable functions' ``Workflow``, ``Invocation`` and ``durable.*``).
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        logger: Any = None,
        naming: Naming = "continuum",
    ) -> None:
        if naming not in _VOCABULARIES:
            raise ConfigurationError(
                f"Tracing(naming={naming!r}) is not a naming: use 'continuum' or 'aws'"
            )
        self._provider = tracer_provider
        self._tracer: Any = None
        self._ids: _ChosenIds | None = None
        self._tasks: dict[str, _TaskTrace] = {}
        self._lock = threading.Lock()
        self._logger = logger
        #: the logger's methods that add and remove keys, found at the first span
        self._keys: tuple[Any, Any] | None = None
        self._words = _VOCABULARIES[naming]
        #: the last trace id given to the logger, and its hex form
        self._trace_hex: tuple[int, str] = (0, "")

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

    def _parent(self, task: _TaskTrace, span_id: int) -> Context:
        """The context of span ``span_id`` (the root's is kept: most spans hang under it)."""
        context = task.parents.get(span_id)
        if context is None:
            above = SpanContext(task.trace_id, span_id, is_remote=True, trace_flags=_SAMPLED)
            context = trace.set_span_in_context(trace.NonRecordingSpan(above), Context())
            if span_id == task.root:
                task.parents[span_id] = context
        return context

    def _start(
        self,
        name: str,
        task: _TaskTrace,
        *,
        start: float,
        parent: int | None,
        span_id: int | None = None,
        attributes: dict[str, Any],
        links: list[Link] | None = None,
    ) -> Span:
        """Start a span of ``task``'s trace under span ``parent`` (None: the trace's root),
        with id ``span_id`` when given; nothing starts before its task (a fork's wait, reached
        in the task it was forked from, starts with the fork)."""
        tracer = self._tracer or self._get_tracer()
        start = max(start, task.created_at)
        context = Context() if parent is None else self._parent(task, parent)
        ids = self._ids
        if ids is None or (span_id is None and parent is not None):  # the SDK's own ids
            span: Span = tracer.start_span(
                name,
                context=context,
                kind=SpanKind.INTERNAL,
                attributes={**task.common, **attributes},
                links=links or (),
                start_time=_ns(start),
            )
            return span
        chosen = ids.chosen
        chosen.span_id = span_id
        chosen.trace_id = task.trace_id if parent is None else None
        try:
            span = tracer.start_span(
                name,
                context=context,
                kind=SpanKind.INTERNAL,
                attributes={**task.common, **attributes},
                links=links or (),
                start_time=_ns(start),
            )
        finally:
            chosen.span_id = chosen.trace_id = None
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
        attributes: dict[str, Any],
        status: Status | None = None,
        links: list[Link] | None = None,
    ) -> None:
        """Send a span that is over: it started at ``start`` and ends at ``end``."""
        later = _Later(name, start, max(end, start), parent, span_id, attributes, links, status)
        if task.live:
            later.span = self._make(task, later)
        task.held.append(later)

    def _send_held(self, task: _TaskTrace) -> None:
        """Make and send the spans a write of the record now holds."""
        held = task.held
        while held:  # popleft is atomic: a map item's thread may hold one meanwhile
            self._send(task, held.popleft())

    def _make(self, task: _TaskTrace, later: _Later) -> Span:
        return self._start(
            later.name,
            task,
            start=later.start,
            parent=later.parent,
            span_id=later.span_id,
            attributes=later.attributes,
            links=later.links,
        )

    def _send(self, task: _TaskTrace, later: _Later) -> None:
        span = later.span
        if span is None:
            span = self._make(task, later)
        if later.outcome is not None:
            span.set_attribute(*later.outcome)
        if later.status is not None:
            span.set_status(later.status)
        span.end(end_time=_ns(later.end))

    def _context_span(self, task: _TaskTrace, turn: int, path: str) -> int:
        """The span of the child context at ``path`` (the root for the turn itself)."""
        if not path:
            return task.root
        return task.span_id("context", turn, path)

    def _holder_span(self, task: _TaskTrace, turn: int, path: str) -> int:
        """The span that holds what ends now in the context at ``path``: the operation open
        there (``wait_for_callback``), else the context's."""
        if task.groups:
            group = task.groups.get((turn, path))
            if group is not None:
                group.touched = True
                return group.span_id
        return self._context_span(task, turn, path)

    def _log_keys(self, ids: tuple[int, int] | None) -> None:
        """Give the logger the keys of the span of these (trace id, span id); None: none."""
        keys = self._keys or self._key_methods()
        if ids is None:
            keys[1](["trace_id", "span_id"])
            return
        trace_id, span_id = ids
        trace_hex = self._trace_hex
        if trace_hex[0] != trace_id:
            trace_hex = self._trace_hex = (trace_id, f"{trace_id:032x}")
        keys[0](trace_id=trace_hex[1], span_id=f"{span_id:016x}")

    def _key_methods(self) -> tuple[Any, Any]:
        """The logger's methods that add and remove keys: its thread's own where it has them
        (a ``map``'s items run steps side by side on threads, each in its own span)."""
        logger = self._logger
        if logger is None:
            from aws_lambda_powertools import Logger

            logger = self._logger = Logger(service="continuum")
        self._keys = (
            getattr(logger, "thread_safe_append_keys", None) or logger.append_keys,
            getattr(logger, "thread_safe_remove_keys", None) or logger.remove_keys,
        )
        return self._keys

    # -- invocations -------------------------------------------------------------------------

    def invocation_started(self, event: InvocationStarted) -> None:
        words, stack = self._words, event.stack
        tracer = self._tracer or self._get_tracer()
        is_child = event.parent_id is not None
        above = parse_traceparent(event.traceparent)
        trace_id = task_trace_id(stack, event.task_id, event.traceparent if is_child else None)
        links = []
        if above is not None and not is_child:
            caller = SpanContext(above[0], above[1], is_remote=True, trace_flags=_SAMPLED)
            links.append(Link(caller, {"continuum.link": "caller"}))
        if event.retries:  # the root of the run this retry follows, in the same trace
            before = root_span_id(stack, event.task_id, event.retries - 1)
            run = SpanContext(trace_id, before, is_remote=True, trace_flags=_SAMPLED)
            links.append(Link(run, {"continuum.link": "retry of"}))
        created = event.created_at
        if event.first_started_at:
            created = min(created, event.first_started_at)
        task = _TaskTrace(
            stack=stack,
            task_id=event.task_id,
            trace_id=trace_id,
            common=words.common(stack, event.task_id, event.task_name),
            root=root_span_id(stack, event.task_id, event.retries),
            root_parent=above[1] if above is not None and is_child else None,
            root_links=links,
            created_at=created,
            invocation_number=event.number,
            retries=event.retries,
            request_id=event.request_id,
            invocation_started=event.started_at,
            live=self._ids is None or not _cannot_tell_when_made(tracer),
        )
        with self._lock:
            self._tasks[event.task_id] = task
        dead = event.crashed
        if dead is not None:
            self._emit(
                words.invocation,
                task,
                start=dead.started_at,
                end=dead.last_seen_at,
                parent=task.root,
                span_id=task.span_id("invocation", dead.number),
                attributes=words.crashed(dead.number, dead.request_id),
                status=Status(StatusCode.ERROR, "its worker died holding the task"),
            )
        task.invocation = self._start(
            words.invocation,
            task,
            start=event.started_at,
            parent=task.root,
            span_id=task.span_id("invocation", event.number),
            attributes=words.invocation_start(event),
        )
        task.invocation_links = [
            Link(task.invocation.get_span_context(), words.link(event.request_id))
        ]
        self._send_held(task)  # the crash report: the claim's write holds it
        context = task.invocation.get_span_context()
        task.invocation_ids = context.trace_id, context.span_id
        self._log_keys(task.invocation_ids)

    def invocation_ended(self, event: InvocationEnded) -> None:
        with self._lock:
            task = self._tasks.get(event.task_id)
            if task is None or task.request_id != event.request_id:
                return  # a stale worker's end: the state is the next worker's (or gone)
            del self._tasks[event.task_id]
        if task.invocation is None:
            return
        if event.outcome == _FENCED:
            # Another worker holds the task and reports this invocation as crashed, under
            # this one's ids: what it did is not in the record, and is never sent.
            task.held.clear()
            self._log_keys(None)
            return
        ended = max(event.ended_at, event.started_at)
        # An attempt cut off without an end (a control-flow unwind, its asyncio task
        # cancelled): preempted, or abandoned when the task finished without its step.
        cut_off = "preempted" if task.finished is None else "abandoned"
        for attempt in task.attempts.values():
            self._end_attempt(attempt, cut_off)
            attempt.end = ended
            self._send(task, attempt)
        if task.finished is not None:
            self._send_abandoned_steps(task, ended)
        self._send_open(task, ended)
        span = task.invocation
        for name, value in self._words.invocation_end(
            event.outcome, event.steps_executed, event.steps_replayed
        ).items():
            span.set_attribute(name, value)
        if event.outcome in _FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, f"the invocation {event.outcome}"))
        else:
            span.set_status(_OK)  # a suspension is this invocation's success
        span.end(end_time=_ns(ended))
        if task.finished is not None:
            self._send_root(task, task.finished, ended)
        self._send_held(task)  # the hold's last write is done
        self._log_keys(None)

    def operations_saved(self, event: OperationsSaved) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        self._send_held(task)
        since, saved_open = task.invocation_started, {}
        for op in event.operations:
            if op.status not in _OPEN_STATUSES:
                continue
            if op.kind == "step":
                kind, name = "step", op.name
            elif (wait := _OPEN_KINDS.get(op.kind)) is not None:
                kind, name = wait.event, wait.named(op.name)
            else:
                continue
            saved_open[op.turn, op.id] = kind, name, op.started_at or since, op.attempt
        task.saved_open = saved_open

    def _send_open(self, task: _TaskTrace, ended: float) -> None:
        """Send what is open as the invocation ends (a wait, a step whose retry waits) as a
        span of this invocation, status UNSET: its own span comes when it ends."""
        words, invocation = self._words, task.invocation
        assert invocation is not None
        parent = invocation.get_span_context().span_id
        since = task.invocation_started  # what began earlier shows from this invocation's start
        self._send_saved_open(task, ended)
        for (turn, key), wait in task.waits.items():
            self._emit(
                words.wait_name(wait.name),
                task,
                start=max(wait.started_at, since),
                end=ended,
                parent=parent,
                span_id=task.span_id("open", turn, key, task.invocation_number),
                attributes=words.wait(wait.kind, key, wait.name, "started"),
            )
        for group in task.groups.values():
            started = group.started
            self._emit(
                words.operation_name(started.kind, started.name),
                task,
                start=max(started.started_at, since),
                end=ended,
                parent=parent,
                span_id=task.span_id(
                    "open",
                    started.turn,
                    started.key,
                    task.invocation_number,
                ),
                attributes=words.operation(started.kind, started.key, started.name, "started"),
            )
        for (turn, key), (first, _, name, attempts) in task.firsts.items():
            self._emit(
                name,
                task,
                start=max(first, since),
                end=ended,
                parent=parent,
                span_id=task.span_id("open", turn, key, task.invocation_number),
                attributes=words.step(key, name, attempts, "started"),
            )

    def _send_abandoned_steps(self, task: _TaskTrace, ended: float) -> None:
        """Send the steps and contexts still open when their task finished (an asyncio task
        cancelled mid-attempt, and its context): they never end, and what ended in them
        hangs under them."""
        for (turn, key), (first, step_span, name, attempts) in task.firsts.items():
            self._emit(
                name,
                task,
                start=first,
                end=ended,
                parent=self._holder_span(task, turn, _holder_path(key)),
                span_id=step_span,
                attributes=self._words.step(key, name, attempts, "abandoned"),
                links=task.invocation_links,
            )
        task.firsts.clear()
        for (turn, path), started in task.contexts.items():
            name = f"{started.name} {started.index}" if started.kind == "item" else started.name
            self._emit(
                name,
                task,
                start=started.started_at,
                end=ended,
                parent=self._holder_span(task, turn, _parent_path(path)),
                span_id=self._context_span(task, turn, path),
                attributes=self._words.context(started.kind, path, started.name, "abandoned"),
                links=task.invocation_links,
            )
        task.contexts.clear()

    def _send_saved_open(self, task: _TaskTrace, ended: float) -> None:
        """Send what the record held open at its last write and this invocation did not
        reach live (a wait reached in an earlier one): its spans are this invocation's too."""
        words, invocation = self._words, task.invocation
        assert invocation is not None
        parent, since = invocation.get_span_context().span_id, task.invocation_started
        for (turn, key), (kind, name, first, attempts) in task.saved_open.items():
            if (turn, key) in task.waits or (turn, key) in task.firsts:
                continue  # reached here: sent with what this invocation knows of it
            step = kind == "step"
            self._emit(
                name if step else words.wait_name(name),
                task,
                start=max(first, since),
                end=ended,
                parent=parent,
                span_id=task.span_id("open", turn, key, task.invocation_number),
                attributes=words.step(key, name, attempts, "started")
                if step
                else words.wait(kind, key, name, "started"),
            )

    def task_finished(self, event: TaskFinished) -> None:
        task = self._tasks.get(event.task_id)
        if task is not None:
            task.finished = event  # sent after its invocation's span: a parent holds its children

    def _send_root(self, task: _TaskTrace, event: TaskFinished, ended: float) -> None:
        failed = event.status == "failed"
        self._emit(
            self._words.root_name(event.task_name),
            task,
            start=min(task.created_at, event.finished_at),
            end=max(event.finished_at, ended),
            parent=task.root_parent,
            span_id=task.root,
            attributes=self._words.root(event.status, event.retries),
            status=(
                Status(StatusCode.ERROR, f"{event.error_type}: {event.error}")
                if failed
                else _OK
                if event.status == "succeeded"
                else None
            ),
            links=task.root_links,
        )

    # -- steps -------------------------------------------------------------------------------

    def step_started(self, event: StepStarted) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        key = event.path + event.key
        first = event.first_started_at or event.started_at
        slot = event.turn, key
        known = task.firsts.get(slot)
        step_span = task.span_id("step", event.turn, key, first) if known is None else known[1]
        task.firsts[slot] = first, step_span, event.name, event.attempt
        attempt = _Later(
            f"{event.name} attempt {event.attempt}",
            event.started_at,
            event.started_at,
            step_span,
            None,
            self._words.attempt(key, event.name, event.attempt, event.replay),
            task.invocation_links,
        )
        ids = self._ids
        if ids is None or task.live:  # the span starts now, and its id is the log keys'
            attempt.span = self._make(task, attempt)
            context = attempt.span.get_span_context()
            log_ids = context.trace_id, context.span_id
        else:  # the id is known before the span is made: it is made when it is sent
            attempt.span_id = ids.fallback.generate_span_id()
            log_ids = task.trace_id, attempt.span_id
        task.attempts[slot] = attempt
        self._log_keys(log_ids)

    def _end_attempt(self, attempt: _Later, outcome: str) -> None:
        attempt.outcome = self._words.attempt_outcome(outcome)

    def step_ended(self, event: StepEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        key = event.path + event.key
        slot = event.turn, key
        attempt = task.attempts.pop(slot, None)
        outcome = event.outcome
        if attempt is not None:
            self._end_attempt(attempt, outcome)
            if outcome in ("failed", "retry"):
                attempt.status = Status(StatusCode.ERROR, f"{event.error_type}: {event.error}")
            elif outcome == "ok":
                attempt.status = _OK
            attempt.end = event.ended_at
            task.held.append(attempt)
            self._log_keys(task.invocation_ids)
        if outcome not in ("ok", "failed"):
            return  # the step goes on: its span is sent when it ends
        known = task.firsts.pop(slot, None)
        if known is None:
            first = event.started_at
            step_span = task.span_id("step", event.turn, key, first)
        else:
            first, step_span = known[0], known[1]
        self._emit(
            event.name,
            task,
            start=first,
            end=event.ended_at,
            parent=self._holder_span(task, event.turn, event.path),
            span_id=step_span,
            attributes=self._words.step(key, event.name, event.attempt, outcome),
            status=_OK
            if outcome == "ok"
            else Status(StatusCode.ERROR, f"{event.error_type}: {event.error}"),
            links=task.invocation_links,
        )

    # -- waits and child contexts ------------------------------------------------------------

    def wait_started(self, event: WaitStarted) -> None:
        task = self._tasks.get(event.task_id)
        if task is not None:
            task.waits[event.turn, event.key] = event

    def wait_ended(self, event: WaitEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        task.waits.pop((event.turn, event.key), None)
        task.saved_open.pop((event.turn, event.key), None)
        self._emit(
            self._words.wait_name(event.name),
            task,
            start=event.started_at,
            end=event.ended_at,
            parent=self._holder_span(task, event.turn, _holder_path(event.key)),
            span_id=wait_span_id(
                task.stack,
                task.task_id,
                event.turn,
                event.key,
                event.started_at,
                task.retries,
            ),
            attributes=self._words.wait(event.kind, event.key, event.name, event.outcome),
            status=_status_of(event.outcome, event.error),
            links=task.invocation_links,
        )

    def context_started(self, event: ContextStarted) -> None:
        task = self._tasks.get(event.task_id)
        if task is not None:
            task.contexts[event.turn, event.path] = event

    def context_ended(self, event: ContextEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        task.contexts.pop((event.turn, event.path), None)
        name = f"{event.name} {event.index}" if event.kind == "item" else event.name
        self._emit(
            name,
            task,
            start=event.started_at,
            end=event.ended_at,
            parent=self._holder_span(task, event.turn, _parent_path(event.path)),
            span_id=self._context_span(task, event.turn, event.path),
            attributes=self._words.context(event.kind, event.path, event.name, event.outcome),
            status=_status_of(event.outcome, event.error),
            links=task.invocation_links,
        )

    # -- operations made of others -----------------------------------------------------------

    def operation_started(self, event: OperationStarted) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        span_id = task.span_id("operation", event.turn, event.key)
        task.groups[event.turn, _holder_path(event.key)] = _Group(span_id, event)

    def operation_ended(self, event: OperationEnded) -> None:
        task = self._tasks.get(event.task_id)
        if task is None:
            return
        group = task.groups.pop((event.turn, _holder_path(event.key)), None)
        if group is None or not group.touched:
            return  # replayed: nothing ended inside it here, so it ended before
        self._emit(
            self._words.operation_name(event.kind, event.name),
            task,
            start=event.started_at,
            end=event.ended_at,
            parent=self._holder_span(task, event.turn, _holder_path(event.key)),
            span_id=group.span_id,
            attributes=self._words.operation(event.kind, event.key, event.name, event.outcome),
            status=_status_of(event.outcome, event.error),
            links=task.invocation_links,
        )
