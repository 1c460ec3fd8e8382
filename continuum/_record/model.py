"""The task record: the pydantic models of everything the next worker must know.

The record is the single source of truth for a task, stored as indented JSON so a person can
read it with ``aws s3 cp s3://bucket/tasks/<id>/record.json -``. How it is encoded, and how
large values move to blobs, is ``codec.py``; how it is stored is ``records.py``.

Compatibility during a rolling deploy: ``format`` is the record's semantics version. A worker
refuses to touch a record of a newer format (it leaves it for a newer worker); fields it does
not know in a record of its own format are kept as they are when it writes the record back.
"""

# The models' annotations are objects, not strings (no ``from __future__ import annotations``):
# pydantic would compile and evaluate each string when it builds a model, on the worker's cold
# import.
import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AliasChoices, Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from continuum._base.clock import utcnow
from continuum._record.counters import Counters as Counters  # re-exported: the record's parts
from continuum._record.counters import StepStats as StepStats
from continuum._record.history import InvocationRun, Usage
from continuum._record.unknown_fields import KeepsUnknownFields
from continuum._record.waiting_for import CancelState, ChildBatch, OpenCallback, ParentLink, Waiter
from continuum.errors import InvalidTaskIdError

#: Record formats: 2 journals retries and cursors; 3 adds waits; 4 segments large lists of the
#: state. A record is written in the lowest format that holds what it uses, so a worker of the
#: previous release can run it in a rolling deploy, and leaves alone what it would misread.
RECORD_FORMAT = 4
SEGMENTS_RECORD_FORMAT = 4
WAITS_RECORD_FORMAT = 3
BASE_RECORD_FORMAT = 2
MAX_TASK_ID_LENGTH = 128
_TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_task_id(task_id: object) -> str:
    """Return ``task_id`` if it is a safe S3 key segment, else raise InvalidTaskIdError.

    Safe means: 1-128 characters of letters, digits, ``.``, ``_`` and ``-``, starting with a
    letter or digit, so ``../x``, absolute paths and control characters cannot appear.
    """
    if not isinstance(task_id, str):
        raise InvalidTaskIdError(f"task id must be a string, got {type(task_id).__name__}")
    if len(task_id) > MAX_TASK_ID_LENGTH:
        raise InvalidTaskIdError(
            f"task id is {len(task_id)} characters long; the limit is {MAX_TASK_ID_LENGTH}",
            task_id=task_id[:40] + "...",
        )
    if not _TASK_ID_RE.fullmatch(task_id):
        raise InvalidTaskIdError(
            "task id is not a safe S3 key segment",
            task_id=task_id,
            hint="use letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return task_id


class Status(StrEnum):
    """Where a task is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """Succeeded, failed or cancelled: the task will never run again."""
        return self in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


class BlobRef(KeepsUnknownFields):
    """A pointer to a content-addressed blob: ``{prefix}/{task_id}/blobs/{sha256}.json.gz``."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0, description="bytes of the uncompressed JSON")
    stored: int = Field(ge=0, description="bytes stored (compressed)")


class SegmentRef(BlobRef):
    """A segment: a blob holding the JSON list of a run of consecutive items of a large list."""

    items: int = Field(ge=0, description="how many items of the list it holds")


class SegmentedList(KeepsUnknownFields):
    """A large list of the state, stored in segments (``segments.py``).

    The list at ``path`` (the keys that lead to it from the top of the state; empty: the state
    itself) is the items of ``segments``, in order, followed by the items the stored state
    holds at ``path`` (its tail, the latest items).
    """

    path: list[str]
    segments: list[SegmentRef]


class Lease(KeepsUnknownFields):
    """Who runs the task now, and until when."""

    owner: str
    expires_at: datetime
    message_id: str | None = None


class ErrorInfo(KeepsUnknownFields):
    """Why a task failed (or why a step did). ``traceback``: where the user's code raised,
    its last frames without locals (absent in records written before it was kept)."""

    type: str
    message: str
    step: str | None = None
    turn: int | None = None
    traceback: str | None = None


@dataclass(slots=True)
class JournalEntry:
    """One step's outcome in the current turn (a dataclass, not a model: one is made per step).

    ``ok`` with ``partial`` false: the step returned ``result``. ``ok`` false: it raised
    ``error`` after ``attempts`` attempts. ``partial``: the step is not done: a cooperative
    step paused at ``cursor``, or (``retry_at`` set) a failed attempt waits for its retry.
    """

    key: str
    name: str
    ok: bool = True
    result: Any = None
    result_ref: BlobRef | None = None
    error: ErrorInfo | None = None
    duration_s: float = 0.0
    attempts: int = 1
    partial: bool = False
    cursor: Any = None
    cursor_ref: BlobRef | None = None
    #: a failed attempt with retries left: the next one may start at this time (epoch s).
    retry_at: float | None = None
    #: what the entry records: a step, or a wait (``EntryKind``).
    kind: str = "step"
    #: a wait's deadline (epoch s), computed once, when the wait was first reached.
    deadline: float | None = None
    #: what a wait is about: a callback's token, the inbox key of the signal it took.
    ref: str | None = None
    #: an ``at_most_once`` step was started here and has not been recorded as done.
    started: bool = False
    #: a child context's (or a batch's) own journal, while it is not done.
    children: "list[JournalEntry] | None" = None
    #: when a step's first attempt started, a wait or a child context was first reached
    #: (epoch s): the true start of what outlives an invocation, for traces.
    since: float | None = None
    #: an asyncio task of an async turn that ended (with a value or an error): its place in
    #: the order the turn's asyncio tasks ended in, so that a replay ends them in that order.
    ended: int | None = None


def walk(journal: list[JournalEntry]) -> Iterator[JournalEntry]:
    """Every entry of a journal, depth first: a child context's entries after it."""
    for entry in journal:
        yield entry
        if entry.children:
            yield from walk(entry.children)


def walk_with_paths(
    journal: list[JournalEntry], path: str = ""
) -> Iterator[tuple[str, JournalEntry]]:
    """``walk``, each entry with the path of the context it is in (``block#1/``; ``""`` at
    the top): its id is that path and its key."""
    for entry in journal:
        yield path, entry
        if entry.children:
            yield from walk_with_paths(entry.children, f"{path}{entry.key}/")


class EntryKind(StrEnum):
    """What a journal entry records."""

    STEP = "step"
    SLEEP = "sleep"
    CALLBACK = "callback"  # a callback was created (ref: its token)
    CALLBACK_RESULT = "callback_result"  # a callback's answer was awaited (ref: its token)
    SIGNAL = "signal"  # a signal was awaited (ref: the signal taken)
    CANCEL = "cancel"  # TaskCancelledError was raised here
    CONTEXT = "context"  # a child context, or one branch or item of a batch (its children)
    BATCH = "batch"  # ctx.parallel or ctx.map: one CONTEXT child per branch or item
    CHILDREN = "children"  # ctx.invoke or ctx.map_tasks: child tasks (ref: their id prefix)


def _drop_defaults(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = []
    for entry in entries:
        slim = {k: v for k, v in entry.items() if k not in _DEFAULTS or v != _DEFAULTS[k]}
        if slim.get("children"):
            slim["children"] = _drop_defaults(slim["children"])
        kept.append(slim)
    return kept


#: JournalEntry fields left out of the stored record when they hold their default, so that
#: an entry shows what happened and nothing else.
_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(JournalEntry) if f.name not in ("key", "name")
}


class _Slim:
    """``Annotated[list[JournalEntry], _Slim()]``: entries are written without the fields that
    hold their defaults. A wrap serializer on the core schema, as ``@field_serializer`` makes,
    without importing that decorator's module on the worker's cold import."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        slim = core_schema.wrap_serializer_function_ser_schema(
            lambda entries, serialize: _drop_defaults(serialize(entries))
        )
        return {**handler(source), "serialization": slim}


class TaskRecord(KeepsUnknownFields):
    """The record of one task: everything the next worker must know, readable by a person."""

    format: int = BASE_RECORD_FORMAT
    task_id: str
    task_name: str
    status: Status = Status.PENDING
    generation: int = 0
    lease: Lease | None = None
    state: Any = None
    state_ref: BlobRef | None = None
    #: the state's large lists stored as segments: the stored state holds only their tails.
    state_segments: list[SegmentedList] = []
    state_version: int = 1
    turn: int = 0
    journal: Annotated[list[JournalEntry], _Slim()] = []
    step_stats: dict[str, StepStats] = {}
    #: durations of record saves and of continuation sends: a suspension costs one of each.
    save_stats: StepStats = Field(default_factory=StepStats)
    send_stats: StepStats = Field(default_factory=StepStats)
    counters: Counters = Field(default_factory=Counters)
    suspend_reason: str | None = None
    #: the id of the message whose worker suspended the task (only it may trigger a resend).
    suspended_by: str | None = None
    #: the most time an invocation has had at its claim (seconds): what a fresh one gets.
    invocation_budget_s: float = 0.0
    #: consecutive suspensions in which no step ran and no turn completed.
    idle_suspensions: int = 0
    #: after a worker died, the next ones run in recovery: they save a marker before each step
    #: (``running_step``: ``turn:position:key``) and the journal after it, until the task
    #: suspends, so that a death is blamed on the step that was running, if any.
    recovering: bool = Field(default=False, validation_alias=AliasChoices("recovering", "careful"))
    running_step: str | None = None
    #: consecutive worker deaths while the same step was running (``crash_at``).
    crashes: int = 0
    crash_at: str | None = None
    result: Any = None
    result_ref: BlobRef | None = None
    error: ErrorInfo | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    #: what a ``waiting`` task waits for, and when the earliest deadline falls.
    waiting_for: list[Waiter] = []
    wake_at: datetime | None = None
    #: the one-time schedule that may hold this generation's timer (a long wait handed to the
    #: scheduler), by name: whoever claims the task deletes it; None: no schedule.
    schedule: str | None = None
    #: callbacks created and not yet answered, by token (``callback id = task_id.token``).
    callbacks: dict[str, OpenCallback] = {}
    #: inbox keys of the signals the task took (a signal is taken once).
    signals_taken: list[str] = []
    #: a cancel request the worker saw.
    cancel: CancelState | None = None
    max_value_bytes: int | None = None  #: its worker's max_state_bytes: clients check sends
    #: when a worker last listed the task's inbox (epoch seconds).
    inbox_checked_at: float | None = None
    #: what each recent invocation did (``history.py``), and what the task cost so far.
    history: list[InvocationRun] = []
    usage: Usage = Field(default_factory=Usage)
    #: the task this one was forked from (``continuum fork``).
    forked_from: str | None = None
    #: the parent of a child task (``ctx.invoke``, ``ctx.map_tasks``), and the children this
    #: task started.
    parent: ParentLink | None = None
    children: list[ChildBatch] = []
    #: a W3C trace context: a child task's spans hang under this span (the parent's wait that
    #: started it); another task's trace links to it (the caller's span around client.start).
    traceparent: str | None = None

    def blob_refs(self) -> list[BlobRef]:
        """Every blob this record points at."""
        refs: list[BlobRef | None] = [self.state_ref, self.result_ref]
        for listed in self.state_segments:
            refs.extend(listed.segments)
        for entry in walk(self.journal):
            refs.extend((entry.result_ref, entry.cursor_ref))
        return [ref for ref in refs if ref is not None]
