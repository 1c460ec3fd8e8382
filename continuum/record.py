"""The task record and the continuation message: pydantic models and their JSON codec.

The record is the single source of truth for a task. It is stored as indented JSON so a person
can read it with ``aws s3 cp s3://bucket/tasks/<id>/record.json -``. A state or step result
whose JSON exceeds the inline limit is moved to a content-addressed, gzip-compressed blob
beside the record; the record keeps a :class:`BlobRef` (digest and sizes) in its place.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from continuum.errors import (
    BadMessageError,
    InvalidTaskIdError,
    PayloadTooLargeError,
    RecordCorruptError,
)

RECORD_FORMAT = 1
MESSAGE_FORMAT = 1
DEFAULT_INLINE_LIMIT_BYTES = 32 * 1024
MAX_TASK_ID_LENGTH = 128
MAX_MESSAGE_BYTES = 8 * 1024
#: gzip level of blobs: on a 5 MB conversation level 1 takes a quarter of level 6's time for
#: 16% more bytes (benchmarks/checkpoint.py); the save's time counts against the budget.
BLOB_GZIP_LEVEL = 1
_TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (what the record's timestamps hold)."""
    return datetime.now(UTC)


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
        return self in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class BlobRef(_Model):
    """A pointer to a content-addressed blob: ``{prefix}/{task_id}/blobs/{sha256}.json.gz``."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0, description="bytes of the uncompressed JSON")
    stored: int = Field(ge=0, description="bytes stored (compressed)")


class Lease(_Model):
    """Who runs the task now, and until when."""

    owner: str
    expires_at: datetime
    message_id: str | None = None


@dataclass
class StepStats:
    """Online statistics of one step's durations, kept in the record.

    Durations of steps are roughly log-normal, so the mean and variance are kept of
    ``log(seconds)`` (Welford's method); ``max_s`` guards the tail for small samples.
    A plain dataclass (pydantic validates and serialises it inside the record) because it is
    updated after every step, where a model's validating attribute writes would cost more
    than the rest of the step's bookkeeping.
    """

    count: int = 0
    log_mean: float = 0.0
    log_m2: float = 0.0
    max_s: float = 0.0
    total_s: float = 0.0


@dataclass
class Counters:
    """What happened to the task, summed over its whole life (a dataclass, like StepStats)."""

    invocations: int = 0
    continuations: int = 0
    turns: int = 0
    steps_executed: int = 0
    steps_replayed: int = 0
    step_failures: int = 0
    saves: int = 0
    bytes_saved: int = 0
    recoveries: int = 0
    preemptions: int = 0
    preempted_s: float = 0.0


class ErrorInfo(_Model):
    """Why a task failed."""

    type: str
    message: str
    step: str | None = None
    turn: int | None = None


@dataclass
class JournalEntry:
    """One step's outcome in the current turn (a dataclass: one is made per step)."""

    key: str
    name: str
    ok: bool = True
    result: Any = None
    result_ref: BlobRef | None = None
    error: ErrorInfo | None = None
    duration_s: float = 0.0
    attempts: int = 1
    #: a cooperative step that paused: not done, and where to resume.
    partial: bool = False
    cursor: Any = None


class TaskRecord(_Model):
    """The record of one task: everything the next worker must know, readable by a person."""

    format: int = RECORD_FORMAT
    task_id: str
    task_name: str
    status: Status = Status.PENDING
    generation: int = 0
    lease: Lease | None = None
    state: Any = None
    state_ref: BlobRef | None = None
    state_version: int = 1
    turn: int = 0
    journal: list[JournalEntry] = Field(default_factory=list)
    step_stats: dict[str, StepStats] = Field(default_factory=dict)
    #: durations of record writes and of continuation sends: a suspension costs one of each.
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
    #: after a worker died, the next ones run carefully: they save a marker before each step
    #: (``running_step``: ``turn:position:key``) and the journal after it, until the task
    #: suspends, so that a death is blamed on the step that was running, if any.
    careful: bool = False
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


class Continuation(_Model):
    """The SQS message that says "run generation N of task T". Nothing the record holds."""

    v: int = MESSAGE_FORMAT
    task_id: str
    generation: int = Field(ge=0)
    reason: str = Field(max_length=200)
    sent_at: float
    #: HMAC-SHA256 of the other fields, when the app has a signing key.
    sig: str | None = Field(default=None, max_length=64)

    def signature(self, key: str) -> str:
        payload = f"{self.v}|{self.task_id}|{self.generation}|{self.reason}|{self.sent_at!r}"
        return hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()


def dump_json(value: Any) -> bytes:
    """Canonical compact JSON (sorted keys) used for blobs and size checks."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()


def pack_blob(data: bytes, digest: str | None = None) -> tuple[BlobRef, bytes]:
    """Compress a JSON payload and name it by the SHA-256 of its uncompressed bytes."""
    packed = gzip.compress(data, compresslevel=BLOB_GZIP_LEVEL, mtime=0)
    digest = digest or hashlib.sha256(data).hexdigest()
    return BlobRef(sha256=digest, size=len(data), stored=len(packed)), packed


def unpack_blob(ref: BlobRef, packed: bytes, *, task_id: str) -> Any:
    """Decompress a blob, verify its digest, and parse it."""
    try:
        data = gzip.decompress(packed)
    except (OSError, EOFError) as exc:
        raise RecordCorruptError(f"blob {ref.sha256} is not valid gzip", task_id=task_id) from exc
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise RecordCorruptError(f"blob {ref.sha256} does not match its digest", task_id=task_id)
    return json.loads(data)


#: Stores the JSON ``data`` whose SHA-256 is ``digest`` as a blob (packing it only if the
#: blob is not stored yet) and returns its reference.
PutBlob = Callable[[str, bytes], BlobRef]
GetBlob = Callable[[BlobRef], bytes]


def _externalize(
    value: Any, limit: int, put: PutBlob, *, most: int | None, what: str, task_id: str
) -> tuple[Any, BlobRef | None]:
    if value is None:
        return None, None
    data = dump_json(value)
    if most is not None and len(data) > most:
        raise PayloadTooLargeError(
            f"{what} is {len(data)} bytes as JSON; the limit is {most}",
            task_id=task_id,
            hint="keep large data outside the state (e.g. in your own S3 object) and store a "
            "reference, or raise max_state_bytes",
        )
    if len(data) <= limit:
        return value, None
    return None, put(hashlib.sha256(data).hexdigest(), data)


def encode_record(
    record: TaskRecord,
    *,
    put_blob: PutBlob,
    inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES,
    max_value_bytes: int | None = None,
) -> bytes:
    """Serialise a record, moving state and results over ``inline_limit`` bytes to blobs.

    The in-memory record is not changed: it keeps its full values.

    Raises:
        PayloadTooLargeError: the state, the result or a step result is over
            ``max_value_bytes``.
    """
    tid = record.task_id
    stored = record.model_copy(deep=False)
    stored.state, stored.state_ref = _externalize(
        record.state, inline_limit, put_blob, most=max_value_bytes, what="the state", task_id=tid
    )
    stored.result, stored.result_ref = _externalize(
        record.result, inline_limit, put_blob, most=max_value_bytes, what="the result", task_id=tid
    )
    journal = []
    for entry in record.journal:
        result, ref = _externalize(
            entry.result,
            inline_limit,
            put_blob,
            most=max_value_bytes,
            what=f"the result of step {entry.key!r}",
            task_id=tid,
        )
        changed = ref is not None or entry.result_ref is not None
        journal.append(replace(entry, result=result, result_ref=ref) if changed else entry)
    stored.journal = journal
    return stored.model_dump_json(indent=1).encode()


def decode_record(data: bytes, *, task_id: str, get_blob: GetBlob) -> TaskRecord:
    """Parse a stored record and bring its blobs back inline (digests verified)."""
    try:
        record = TaskRecord.model_validate_json(data)
    except ValidationError as exc:
        raise RecordCorruptError(
            f"record does not parse: {describe_errors(exc)}",
            task_id=task_id,
            hint="restore an earlier version of the record (bucket versioning keeps them), "
            "then run `continuum resume TASK_ID`",
        ) from exc
    if record.task_id != task_id:
        raise RecordCorruptError(
            f"record names task {record.task_id!r}, but is stored under {task_id!r}",
            task_id=task_id,
        )
    if record.state_ref is not None:
        record.state = unpack_blob(record.state_ref, get_blob(record.state_ref), task_id=task_id)
    if record.result_ref is not None:
        record.result = unpack_blob(record.result_ref, get_blob(record.result_ref), task_id=task_id)
    for entry in record.journal:
        if entry.result_ref is not None:
            entry.result = unpack_blob(
                entry.result_ref, get_blob(entry.result_ref), task_id=task_id
            )
    return record


def encode_message(message: Continuation, *, signing_key: str | None = None) -> str:
    if signing_key:
        message = message.model_copy(update={"sig": message.signature(signing_key)})
    return message.model_dump_json(exclude_none=True)


def decode_message(body: str | bytes, *, signing_key: str | None = None) -> Continuation:
    """Parse a continuation body; anything else raises BadMessageError with the reason.

    With a ``signing_key``, a message without a valid signature is refused as forged.
    """
    if len(body) > MAX_MESSAGE_BYTES:
        raise BadMessageError(f"message body is {len(body)} bytes; a continuation is small")
    try:
        message = Continuation.model_validate_json(body)
    except ValidationError as exc:
        raise BadMessageError(f"not a continuation message: {describe_errors(exc)}") from exc
    check_task_id(message.task_id)
    if signing_key:
        if message.sig is None:
            raise BadMessageError(
                "message is not signed, and this app requires signatures", task_id=message.task_id
            )
        if not hmac.compare_digest(message.sig, message.signature(signing_key)):
            raise BadMessageError(
                "message signature does not match: forged or signed with another key",
                task_id=message.task_id,
            )
    return message


def describe_errors(exc: ValidationError, *, most: int = 3) -> str:
    """The first few validation errors as ``where: what; ...``."""
    parts = []
    for err in exc.errors(include_url=False)[:most]:
        where = ".".join(str(part) for part in err["loc"]) or "value"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - most
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
