"""The events observers receive, but the one every worker emits (``MessageHandled``, in
``observers``): a worker builds them only when an observer wants them, so this module loads
then, not on a cold start (each frozen dataclass compiles its methods when defined). They
have slots: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
which a slotted one does faster, on the step path of a traced task.

Times are epoch seconds of the clock continuum reads (the virtual clock where one runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
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
    #: its number among the task's invocations (1: the first)
    number: int = 0
    #: the Lambda request id of this invocation (the lease's owner)
    request_id: str | None = None
    #: when the task was created, and when this invocation claimed it (epoch seconds)
    created_at: float = 0.0
    started_at: float = 0.0
    #: the W3C ``traceparent`` the record holds: the span that started a child task, or the
    #: caller's span around ``client.start`` (see ``parent_id``)
    traceparent: str | None = None
    #: the parent task of a child task (``ctx.invoke``, ``ctx.map_tasks``)
    parent_id: str | None = None
    #: the invocation before this one died holding the task (this claim found it running)
    crashed: CrashedInvocation | None = None
    #: where the task's records live (bucket and prefix): trace ids derive from it
    stack: str = ""
    #: times ``client.retry`` ran the task again (0: its first run)
    retries: int = 0
    #: when the task's first invocation started, if the record still knows (else 0.0)
    first_started_at: float = 0.0


@dataclass(frozen=True, slots=True)
class CrashedInvocation:
    """An invocation whose worker died holding the task, as the next claim found it."""

    number: int
    request_id: str | None
    #: when it claimed the task, and the last time it was known to work (epoch seconds)
    started_at: float
    last_seen_at: float


@dataclass(frozen=True, slots=True)
class InvocationEnded:
    """The invocation's hold on the task ended (``outcome``: the worker's outcome)."""

    task_id: str
    task_name: str
    outcome: str
    duration_s: float
    steps_executed: int
    steps_replayed: int
    #: its number among the task's invocations, and its Lambda request id
    number: int = 0
    request_id: str | None = None
    #: when it claimed the task and when its hold ended (epoch seconds)
    started_at: float = 0.0
    ended_at: float = 0.0
    #: this was the task's first invocation
    first: bool = False


@dataclass(frozen=True, slots=True)
class StepStarted:
    """An attempt of a live step starts (replayed steps send no events).

    ``replay`` is true in an invocation that resumes the step (its earlier attempts, or a
    paused attempt, ran in an earlier invocation); ``first_started_at`` is when its first
    attempt started, in whatever invocation.
    """

    task_id: str
    key: str
    name: str
    turn: int
    attempt: int
    replay: bool = False
    #: when this attempt starts, and when the step's first attempt started (epoch seconds)
    started_at: float = 0.0
    first_started_at: float = 0.0
    #: the child context it runs in ("" in the turn itself; "claims#0/2/" in a map item)
    path: str = ""


@dataclass(frozen=True, slots=True)
class StepEnded:
    """An attempt of a live step ended: ``ok``, ``failed``, ``retry``, ``paused``,
    ``preempted`` or ``cancelled`` (its asyncio task was cancelled: nothing is recorded, and a
    later call runs it again); ``error_type`` names what it raised."""

    task_id: str
    key: str
    name: str
    turn: int
    attempt: int
    outcome: str
    duration_s: float
    error_type: str | None = None
    #: what the attempt raised (its message), when it did not return
    error: str | None = None
    #: the value it returned, as journaled (JSON), when ``outcome`` is ``ok``
    result: Any = None
    #: when the attempt started and ended (epoch seconds)
    started_at: float = 0.0
    ended_at: float = 0.0
    path: str = ""


@dataclass(frozen=True, slots=True)
class WaitStarted:
    """A wait was first reached (``kind``: sleep, callback, signal, children, condition); a
    wait that goes on in a later invocation does not start again. A condition starts when its
    first check ran (``key`` is that check's) and ends with the check that holds, or with
    ``ConditionNotMetError`` (``outcome`` ``failed``).

    ``key`` is its journal key with its child context's path: unique in the turn.
    """

    task_id: str
    kind: str
    name: str
    key: str
    turn: int
    started_at: float


@dataclass(frozen=True, slots=True)
class WaitEnded:
    """A wait ended, in whatever invocation: ``outcome`` ``ok``, ``timeout`` or ``failed``
    (with ``error``) when answered, ``cancelled`` when a cancel ended it, ``abandoned`` when
    its batch completed without it; ``started_at`` is when it was first reached, and
    ``replay`` whether that was in an earlier invocation (this one replayed it)."""

    task_id: str
    kind: str
    name: str
    key: str
    turn: int
    started_at: float
    ended_at: float
    outcome: str = "ok"
    error: str | None = None
    replay: bool = False


@dataclass(frozen=True, slots=True)
class ContextStarted:
    """A child context was first reached (``kind``: ``context`` for ``ctx.child_context``,
    ``batch`` for a whole ``ctx.parallel`` or ``ctx.map``, ``item`` for one of its branches or
    items). ``path`` is where its own steps journal (``claims#0/2/``)."""

    task_id: str
    kind: str
    name: str
    path: str
    turn: int
    started_at: float
    index: int | None = None
    #: a virtual child context (``virtual=True``): no entry of its own; told where the
    #: journal runs live
    virtual: bool = False


@dataclass(frozen=True, slots=True)
class ContextEnded:
    """A child context finished (``outcome`` ``ok`` or ``failed``, with ``error``; an item
    its batch completed without, ``abandoned``), in whatever invocation; ``started_at`` is
    when it was first reached, and ``replay`` whether that was in an earlier invocation."""

    task_id: str
    kind: str
    name: str
    path: str
    turn: int
    started_at: float
    ended_at: float
    outcome: str = "ok"
    error: str | None = None
    index: int | None = None
    virtual: bool = False
    replay: bool = False


@dataclass(frozen=True, slots=True)
class OperationStarted:
    """An operation made of others (``kind``: ``wait_for_callback``, its callback and its
    submitter step) is entered, live or replayed: what ends before its ``OperationEnded``
    at its context's path belongs to it. ``key`` is its callback's journal key with the path;
    ``started_at`` is when it was first reached."""

    task_id: str
    kind: str
    name: str
    key: str
    turn: int
    started_at: float


@dataclass(frozen=True, slots=True)
class OperationEnded:
    """The operation returned (``outcome`` ``ok``), raised (``failed``, with ``error``) or
    was ended by a cancel (``cancelled``); sent on replays too (an observer tells a live
    ending by what ended inside it)."""

    task_id: str
    kind: str
    name: str
    key: str
    turn: int
    started_at: float
    ended_at: float
    outcome: str = "ok"
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ContextEntered:
    """A child context's function (``kind``: ``context``, a block; ``item``, a batch's branch
    or item) begins a run, live or replayed: each run is told, unlike ``ContextStarted``,
    which is told once. ``replaying_children``: it re-runs so that children it recorded in an
    earlier run replay (its steps and waits return what they recorded, up to where it
    stopped)."""

    task_id: str
    kind: str
    name: str
    path: str
    turn: int
    entered_at: float
    index: int | None = None
    replaying_children: bool = False


@dataclass(frozen=True, slots=True)
class SavedOperation:
    """One operation as the record holds it: a step, a wait, a child context, a batch and its items
    (``kind``: the journal's, ``step``, ``sleep``, ``callback``, ``callback_result``,
    ``signal``, ``context``, ``batch``, ``children``, ``cancel``).

    ``id`` is its journal key with its context's path (``block#1/look#0``), unique within its
    ``turn``; ``parent_id`` its context's id (None at the top). A virtual context keeps no
    entry: what runs in it is its parent's, under the ids the journal gives it (``look#1``,
    where a step event says ``grp#1/look#1``). ``status``: ``started`` (running, waiting, or
    paused at a cursor), ``pending`` (a failed attempt waits for its retry), ``succeeded``,
    ``failed``, or ``ended`` (the context of an async task's asyncio task that ended: its entry
    keeps the order it ended in, not its outcome, and runs again on every replay).
    ``started_at``: when it was first reached (None where the journal keeps no time: a wait
    answered where it was reached); ``ended_at``: when a step of one attempt ended (None for the
    rest: the journal keeps a retried step's first start and its last attempt's length).
    ``attempt``: a step's attempts so far. ``replay``: it was first reached in an earlier
    invocation of the task."""

    id: str
    turn: int
    name: str
    kind: str
    status: str
    parent_id: str | None
    started_at: float | None
    ended_at: float | None
    attempt: int
    error: str | None = None
    error_type: str | None = None
    replay: bool = False


@dataclass(frozen=True, slots=True)
class OperationsSaved:
    """A write of the record changed what it durably holds (a write while the task runs,
    the one that parks it, or its finish): ``updated`` are the operations whose status,
    attempt or cursor changed since the last write of this invocation (or since the record
    was claimed), ``operations`` every operation it holds for the current turn and for the
    turns that ended since the last write (a turn's operations are told, and held, as they
    were when it ended: its effect is then in the state); each of ``updated`` is among
    ``operations``, by ``turn`` and ``id``.
    ``request_id`` is the invocation's Lambda request id."""

    task_id: str
    task_name: str
    turn: int
    saved_at: float
    request_id: str | None
    updated: tuple[SavedOperation, ...]
    operations: tuple[SavedOperation, ...]


@dataclass(frozen=True, slots=True)
class TaskParked:
    """The task suspended (continues in a fresh invocation) or went waiting."""

    task_id: str
    task_name: str
    status: str
    generation: int
    reason: str


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """The task finished: succeeded, failed or cancelled."""

    task_id: str
    task_name: str
    status: str
    error_type: str | None
    error: str | None
    #: when the task was created and when it finished (epoch seconds)
    created_at: float = 0.0
    finished_at: float = 0.0
    #: times ``client.retry`` ran the task again before this ending
    retries: int = 0
