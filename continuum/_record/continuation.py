"""The continuation message: what it says, how it is signed, and how it is sent.

A continuation is small JSON that says "run generation N of task T": task id, generation,
reason, sent-at, and nothing the record already holds (the state never travels in a message).
With signing keys, each message carries an HMAC-SHA256 made with the first key and is accepted
if any key verifies it, so a key can be rotated while tasks are in flight (README, "Rotating
the signing key").
"""

# The models' annotations are objects, not strings (no ``from __future__ import annotations``):
# pydantic would compile and evaluate each string when it builds a model, on the worker's cold
# import.
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, ValidationError

from continuum._base.clock import now_s
from continuum._record.model import check_task_id
from continuum._record.unknown_fields import IgnoresUnknownFields
from continuum._record.waiting_for import BatchHint
from continuum.backends.queue import ContinuationQueue
from continuum.errors import BadMessageError, MessageTooNewError, describe_errors

#: The message semantics this code writes and understands; a newer one is left for a newer
#: worker (retried, not acknowledged), never dropped.
MESSAGE_FORMAT = 1
MAX_MESSAGE_BYTES = 8 * 1024


MessageKind = Literal["continue", "timer", "wake"]


class Continuation(IgnoresUnknownFields):
    """The SQS message that says "run generation N of task T". Nothing the record holds."""

    v: int = MESSAGE_FORMAT
    task_id: str
    generation: int = Field(ge=0)
    reason: str = Field(max_length=200)
    sent_at: float
    #: "continue" (run the generation), "timer" (a waiting task's deadline, or the next hop
    #: of a long sleep) or "wake" (something arrived in the task's inbox).
    kind: MessageKind = "continue"
    #: a child's wake: the batch it reports to (an unsigned hint: it only saves a read).
    batch: BatchHint | None = None
    #: HMAC-SHA256 of the other fields, when the app has signing keys.
    sig: str | None = Field(default=None, max_length=64)

    def signature(self, key: str) -> str:
        payload = f"{self.v}|{self.task_id}|{self.generation}|{self.reason}|{self.sent_at!r}"
        if self.kind != "continue":  # messages of the previous release still verify
            payload += f"|{self.kind}"
        return hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()


def parse_keys(keys: str | Sequence[str] | None) -> tuple[str, ...]:
    """Signing keys from an option: a comma-separated string or a sequence; empty: none."""
    if keys is None:
        return ()
    items = keys.split(",") if isinstance(keys, str) else list(keys)
    return tuple(key.strip() for key in items if key and key.strip())


def encode_continuation(message: Continuation, *, keys: Sequence[str] = ()) -> str:
    """The body of a message, signed with the first of ``keys`` if there are any."""
    if keys:
        message = message.model_copy(update={"sig": message.signature(keys[0])})
    return message.model_dump_json(exclude_none=True)


def decode_continuation(body: str | bytes, *, keys: Sequence[str] = ()) -> Continuation:
    """Parse a continuation body; anything else raises BadMessageError with the reason.

    With ``keys``, a message whose signature no key verifies is refused as forged.

    Raises:
        BadMessageError: not a continuation, unsigned, forged, or an unsafe task id.
        MessageTooNewError: a newer continuum wrote it; retry it later, do not drop it.
    """
    if len(body) > MAX_MESSAGE_BYTES:
        raise BadMessageError(f"message body is {len(body)} bytes; a continuation is small")
    try:
        message = Continuation.model_validate_json(body)
    except ValidationError as exc:
        raise BadMessageError(f"not a continuation message: {describe_errors(exc)}") from exc
    check_task_id(message.task_id)
    if message.v > MESSAGE_FORMAT:
        raise MessageTooNewError(
            f"message format {message.v} is newer than this worker's ({MESSAGE_FORMAT})",
            task_id=message.task_id,
            hint="deploy the newer continuum everywhere; the message is retried until then",
        )
    if keys:
        if message.sig is None:
            raise BadMessageError(
                "message is not signed, and this app requires signatures", task_id=message.task_id
            )
        if not any(hmac.compare_digest(message.sig, message.signature(k)) for k in keys):
            raise BadMessageError(
                "message signature does not match any signing key: forged, or signed with a "
                "key that was removed",
                task_id=message.task_id,
            )
    return message


def peek_task_id(body: str) -> str | None:
    """The task id a body names, if it is JSON with one (for logs about bad messages)."""
    try:
        task_id = json.loads(body).get("task_id")
    except (ValueError, AttributeError):
        return None
    return task_id if isinstance(task_id, str) else None


class ScheduleFire(IgnoresUnknownFields):
    """A recurring schedule's fire: "start schedule S's run for the time T it was due".

    Its body is stored in the schedule with ``SCHEDULED_TIME`` as ``at``, which
    EventBridge Scheduler (or the local firer) replaces with the scheduled time at each fire;
    so the signature covers the format, the kind and the schedule's name, never ``at``.
    """

    v: int = MESSAGE_FORMAT
    kind: Literal["schedule"] = "schedule"
    schedule: str = Field(min_length=1, max_length=64)
    at: str = Field(max_length=40)
    sig: str | None = Field(default=None, max_length=64)

    def signature(self, key: str) -> str:
        payload = f"{self.v}|{self.kind}|{self.schedule}"
        return hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()


#: Only a schedule fire's body holds this (a continuation has no "kind" before its fields).
_FIRE_MARK = '"kind":"schedule"'


def is_schedule_fire(body: str) -> bool:
    """Whether a body is a recurring schedule's fire rather than a continuation (cheap)."""
    return _FIRE_MARK in body[:40]


def schedule_fire_body(schedule: str, *, keys: Sequence[str] = ()) -> str:
    """The body a recurring schedule sends, its scheduled time left for the fire to write."""
    from continuum.backends.scheduler import SCHEDULED_TIME  # only a sync makes bodies

    fire = ScheduleFire(schedule=schedule, at=SCHEDULED_TIME)
    if keys:
        fire = fire.model_copy(update={"sig": fire.signature(keys[0])})
    return fire.model_dump_json(exclude_none=True)


def decode_schedule_fire(body: str | bytes, *, keys: Sequence[str] = ()) -> ScheduleFire:
    """Parse (and, with ``keys``, verify) a schedule's fire.

    Raises:
        BadMessageError: not a fire, unsigned or forged.
        MessageTooNewError: a newer continuum wrote it; retry it later, do not drop it.
    """
    if len(body) > MAX_MESSAGE_BYTES:
        raise BadMessageError(f"message body is {len(body)} bytes; a schedule's fire is small")
    try:
        fire = ScheduleFire.model_validate_json(body)
    except ValidationError as exc:
        raise BadMessageError(f"not a schedule's fire: {describe_errors(exc)}") from exc
    if fire.v > MESSAGE_FORMAT:
        raise MessageTooNewError(
            f"message format {fire.v} is newer than this worker's ({MESSAGE_FORMAT})",
            hint="deploy the newer continuum everywhere; the message is retried until then",
        )
    if keys:
        if fire.sig is None:
            raise BadMessageError(
                f"the fire of schedule {fire.schedule!r} is not signed, and this app requires "
                "signatures"
            )
        if not any(hmac.compare_digest(fire.sig, fire.signature(k)) for k in keys):
            raise BadMessageError(
                f"the fire of schedule {fire.schedule!r} has a signature no signing key "
                "matches: forged, or made with a key that was removed (`continuum schedules "
                "sync` signs the schedules again with the current key)"
            )
    return fire


class Continuations:
    """Sends and parses the continuations of one app: a queue and its signing keys.

    Example:
        >>> continuations = Continuations(queue, keys=("k2", "k1"))  # doctest: +SKIP
        >>> continuations.send("t1", generation=3, reason="budget")  # doctest: +SKIP
    """

    def __init__(self, queue: ContinuationQueue, *, keys: Sequence[str] = ()) -> None:
        self.queue = queue
        self.keys = tuple(keys)

    def send(
        self,
        task_id: str,
        *,
        generation: int,
        reason: str,
        delay_s: int = 0,
        kind: MessageKind = "continue",
        batch: BatchHint | None = None,
    ) -> str:
        """Send the continuation for ``generation`` of ``task_id``; return the message id."""
        body = self.body(task_id, generation=generation, reason=reason, kind=kind, batch=batch)
        return self.queue.send(body, delay_s=delay_s)

    def body(
        self,
        task_id: str,
        *,
        generation: int,
        reason: str,
        kind: MessageKind = "continue",
        batch: BatchHint | None = None,
        sent_at: float | None = None,
    ) -> str:
        """The signed body of a continuation (``sent_at`` default: now); a scheduled one
        gives its schedule's time, so that the same schedule has the same body."""
        message = Continuation(
            task_id=task_id,
            generation=generation,
            reason=reason[:200],
            sent_at=now_s() if sent_at is None else sent_at,
            kind=kind,
            batch=batch,
        )
        return encode_continuation(message, keys=self.keys)

    def parse(self, body: str) -> Continuation:
        """Parse (and, with signing keys, verify) a continuation body."""
        return decode_continuation(body, keys=self.keys)
