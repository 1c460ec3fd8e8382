"""What each invocation did, kept in the record itself, so that an operator can see it.

Every claim appends an :class:`InvocationRun` to ``record.history`` and every ending (suspend,
wait, finish) completes it, in the writes the protocol makes anyway: the history costs no S3
write of its own. Each live step adds a :class:`LiveStep` in memory, saved with the next write.
A worker that dies leaves its run ``running``; the next claim marks it ``crashed``. A long
wait's timer hops count on the run that began the wait.

The record keeps the latest ``HISTORY_RUNS`` runs and the step details of the latest
``HISTORY_STEPS`` steps; older ones stay in the record's earlier versions (bucket versioning),
where ``continuum inspect`` finds them.
"""

# The models' annotations are objects, not strings (no ``from __future__ import annotations``):
# pydantic would compile and evaluate each string when it builds a model, on the worker's cold
# import.
import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import Field

from continuum._base.clock import real_monotonic, utcnow
from continuum._record.unknown_fields import KeepsUnknownFields
from continuum._record.waiting_for import Waiter

#: Invocation runs kept in the record (about 300 bytes each without their steps).
HISTORY_RUNS = 100
#: Step details kept in the record across those runs (about 90 bytes each), newest first:
#: with the runs, the history stays under ~60 KB, so it never pushes a record past what a
#: save should cost.
HISTORY_STEPS = 300


class RunOutcome(StrEnum):
    """How an invocation ended."""

    RUNNING = "running"
    SUSPENDED = "suspended"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CRASHED = "crashed"


# LiveStep and Usage are dataclasses, not models: pydantic validates and serialises them in the
# record, and the worker makes and updates them without validating each write.


@dataclass(slots=True)
class LiveStep:
    """One live step call of an invocation (a dataclass: one is made per step).

    ``outcome``: ``ok``, ``failed``, ``retry`` (an attempt failed, another comes), ``paused``
    or ``preempted``.
    """

    key: str
    turn: int
    started: float
    duration_s: float
    attempts: int = 1
    outcome: str = "ok"


@dataclass
class Usage:
    """What a task (or one invocation) cost, in the units the bill counts.

    ``lambda_ms``: invocation time, each invocation rounded up to the millisecond as Lambda
    bills it; ``gb_ms``: the same weighted by the function's memory. S3 and SQS requests are
    the worker's own; the event source's receive and delete of each message are counted as
    ``sqs_receives`` (one each per message).
    """

    invocations: int = 0
    lambda_ms: int = 0
    gb_ms: float = 0.0
    s3_get: int = 0
    s3_put: int = 0
    s3_list: int = 0
    s3_delete: int = 0
    s3_tag: int = 0
    sqs_send: int = 0
    sqs_visibility: int = 0
    sqs_receives: int = 0

    def add(self, other: "Usage") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class InvocationRun(KeepsUnknownFields):
    """One invocation of the task: when, for what message, what it did, how it ended."""

    number: int
    generation: int
    message: str = Field(description="the kind of message that started it")
    request_id: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    duration_s: float | None = None
    turn: int
    turns: int = 0
    steps_executed: int = 0
    steps_replayed: int = 0
    outcome: RunOutcome = RunOutcome.RUNNING
    reason: str | None = None
    waiting_for: list[Waiter] = []
    hops: int = 0
    usage: Usage = Field(default_factory=Usage)
    steps: list[LiveStep] = []
    #: step details trimmed from this run to keep the record small (see HISTORY_STEPS).
    steps_dropped: int = 0


class RunClock:
    """The start of the invocation running now, on the real monotonic clock (what Lambda
    bills; a virtual clock's jumps do not count)."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = real_monotonic()

    def elapsed_s(self) -> float:
        return real_monotonic() - self.started


def begin(
    history: list[InvocationRun],
    *,
    number: int,
    generation: int,
    message: str,
    request_id: str | None,
    turn: int,
) -> InvocationRun:
    """Append the run of an invocation that just claimed the task; mark a dead one crashed."""
    if history and history[-1].outcome == RunOutcome.RUNNING:
        history[-1].outcome = RunOutcome.CRASHED
        history[-1].reason = "its worker died (killed, out of memory, or past its deadline)"
    run = InvocationRun(
        number=number,
        generation=generation,
        message=message,
        request_id=request_id,
        started_at=utcnow(),
        turn=turn,
    )
    history.append(run)
    trim(history)
    return run


def end(
    run: InvocationRun,
    outcome: RunOutcome,
    *,
    reason: str | None,
    turn: int,
    elapsed_s: float,
    memory_mb: int,
    waiting_for: list[Waiter] | None = None,
) -> None:
    """Complete a run just before the write that ends its invocation."""
    run.outcome = outcome
    run.reason = reason
    run.ended_at = utcnow()
    run.duration_s = round(elapsed_s, 3)
    run.turns = turn - run.turn
    run.waiting_for = list(waiting_for or [])
    bill(run.usage, elapsed_s, memory_mb)


def bill(usage: Usage, elapsed_s: float, memory_mb: int) -> None:
    """Count one invocation of ``elapsed_s`` seconds at ``memory_mb`` as Lambda bills it."""
    ms = max(1, math.ceil(elapsed_s * 1000))
    usage.invocations += 1
    usage.lambda_ms += ms
    usage.gb_ms += ms * memory_mb / 1024
    usage.sqs_receives += 1


def trim(history: list[InvocationRun]) -> None:
    """Keep the newest runs, and the newest step details among them."""
    del history[:-HISTORY_RUNS]
    kept = 0
    for run in reversed(history):
        room = max(0, HISTORY_STEPS - kept)
        if len(run.steps) > room:
            run.steps_dropped += len(run.steps) - room
            del run.steps[: len(run.steps) - room]
        kept += len(run.steps)
