"""What a waiting task waits for, as the record keeps it and ``client.status`` shows it.

A wait is journaled like a step (its key is its name and ordinal in the turn) and its deadline
is computed once, when it is first reached. When the task cannot go on, the record says what
it waits for (``Waiter``: a time, a callback, a signal, a child task) and until when, and keeps
every callback the task created and has not yet taken an answer for (``OpenCallback``), so
that the client can refuse an id the task never made.
"""

# The models' annotations are objects, not strings (no ``from __future__ import annotations``):
# pydantic would compile and evaluate each string when it builds a model, on the worker's cold
# import.
import hashlib
import math
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from continuum._base.clock import utcnow
from continuum._record.unknown_fields import IgnoresUnknownFields, KeepsUnknownFields
from continuum.errors import ContinuumError

#: Signal names and callback names are S3 key segments (they appear in inbox keys).
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_name(name: object, *, what: str, task_id: str | None = None) -> str:
    """Return ``name`` if it may name a signal or a wait, else raise ContinuumError."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ContinuumError(
            f"{what} {name!r} is not a valid name",
            task_id=task_id,
            hint="use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


def derived_name(base: str, suffix: str) -> str:
    """A valid wait name made from ``base`` (a function's qualified name, or a name the user
    gave) and ``suffix``: the same every time, so that a replay finds its journal entry."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{base}.{suffix}").lstrip("._-") or suffix
    if len(name) <= 128:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{name[: 128 - len(digest) - 1]}-{digest}"


#: The longest wait accepted; anything longer is a mistake in units, not a plan.
MAX_WAIT_S = 10 * 366 * 24 * 3600.0
Duration = float | int | timedelta


def seconds_of(value: Duration | None, *, what: str, task_id: str) -> float | None:
    """A duration in seconds, refusing negative, infinite and absurd ones (None stays None)."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        raise ContinuumError(
            f"{what} must be seconds or a timedelta, got {value!r}", task_id=task_id
        )
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_WAIT_S:
        raise ContinuumError(
            f"{what} of {value!r} is not a duration a task can wait",
            task_id=task_id,
            hint=f"give 0 to {MAX_WAIT_S / 86400:.0f} days as seconds or a timedelta",
        )
    return float(seconds)


def epoch_to_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


class WaitKind(StrEnum):
    """What a waiter waits for: the kinds continuum has (each is a module of
    ``continuum._waits.kinds``, whose registry lists every kind, and may list more)."""

    TIME = "time"
    CALLBACK = "callback"
    SIGNAL = "signal"
    CHILD = "child"


class Waiter(KeepsUnknownFields):
    """One thing a task waits for: its kind, its name, its id (a callback's id, a child's task
    id, a batch's id prefix) and until when (None: no deadline).

    A batch of child tasks also says how many it waits for and its completion policy, so the
    worker can tell from the inbox alone when the batch can decide.
    """

    #: a kind ``WaitKind`` names (as that member), or another registered kind's value.
    kind: WaitKind | str = Field(union_mode="left_to_right")
    name: str
    id: str | None = None
    deadline: datetime | None = None
    #: a callback's request: what the one who answers it sees (``continuum._base.json_shapes``).
    request: Any = None
    count: int | None = None
    completion: dict[str, Any] | None = None


class ParentLink(KeepsUnknownFields):
    """Whose child a task is, and where the parent waits for it (``continuum._fanout``)."""

    task_id: str
    #: the id prefix of the batch the child belongs to (``ctx.invoke``: the child's own id).
    batch: str
    index: int = 0
    #: the child to start when this one finishes (``map_tasks`` with ``max_concurrency``).
    successor: str | None = None
    #: the batch's size and completion policy (the hint its wakes carry).
    count: int = 1
    completion: dict[str, Any] | None = None
    #: the batch's ``max_concurrency``: child ``index - max_concurrency`` starts this one.
    max_concurrency: int | None = None


class ChildBatch(KeepsUnknownFields):
    """Child tasks a task started: ``prefix`` (``ctx.invoke``: the child's id) and how many
    (``map_tasks``: ``prefix.0`` ... ``prefix.{count-1}``)."""

    prefix: str
    task_name: str
    count: int = 1
    single: bool = True
    #: ids another task held before this one could create them: not its children.
    taken: list[str] = []

    def ids(self) -> list[str]:
        every = [self.prefix] if self.single else [f"{self.prefix}.{i}" for i in range(self.count)]
        return [task_id for task_id in every if task_id not in self.taken] if self.taken else every


class BatchHint(IgnoresUnknownFields):
    """In a child's wake: its batch, so a worker can judge the batch from the parent's inbox
    without reading the parent's record."""

    prefix: str
    count: int
    completion: dict[str, Any] | None = None
    #: False: this report cannot be the one that lets the batch decide, so the wake needs no
    #: LIST. A child with a successor and no completion policy, reporting the first time:
    #: its successor starts only after this report is written, so reports after it, and
    #: the last report's own wake LISTs the inbox (a batch of N would otherwise LIST N
    #: times, O(N^2) keys in all). A repeated report always LISTs.
    decides: bool = True


class OpenCallback(KeepsUnknownFields):
    """A callback the task created and has not taken an answer for.

    Attributes:
        key: the journal key of its creation.
        name: its name (the key unless given).
        timeout_at: when it times out (None: never).
        heartbeat_timeout_s: heartbeats must come at least this often (None: not required).
        heartbeat_at: when the last heartbeat the worker has seen came (or its creation).
        request: what it asks, as JSON (None: nothing said); the client checks an answer
            against the shape it declares (``continuum._base.json_shapes``).
    """

    key: str
    name: str
    created_at: datetime
    timeout_at: datetime | None = None
    heartbeat_timeout_s: float | None = None
    heartbeat_at: datetime | None = None
    request: Any = None

    def deadline(self) -> datetime | None:
        """The earliest of its timeout and its heartbeat deadline."""
        times = [self.timeout_at]
        if self.heartbeat_timeout_s is not None and self.heartbeat_at is not None:
            times.append(
                epoch_to_datetime(self.heartbeat_at.timestamp() + self.heartbeat_timeout_s)
            )
        found = [t for t in times if t is not None]
        return min(found) if found else None


class CancelState(KeepsUnknownFields):
    """A cancel request the worker has seen (the first reason wins)."""

    reason: str | None = None
    requested_at: datetime
    #: TaskCancelledError was raised into the task (journaled where).
    delivered: bool = False


class Signal(BaseModel):
    """A signal a task took from its mailbox: ``ctx.wait_for_signal`` returns it.

    Attributes:
        id: the signal's id (given to ``client.signal`` or made there); unique per name.
        name: its name.
        payload: its JSON payload.
        sent_at: when the client sent it.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    payload: Any = None
    sent_at: datetime = Field(default_factory=utcnow)
