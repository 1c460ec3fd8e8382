"""The fence: may this continuation run its task now? A pure function of what it sees.

SQS delivers at least once, late and out of order; the record decides. The verdict depends only
on the record, the message, the message's SQS id and the time, so a table test covers every
case (``tests/worker/test_fence.py``):

- a finished task's message is acknowledged (FINISHED);
- a message for a generation the record never reached is refused (FUTURE);
- a message for an older generation is stale (STALE), except the very message whose worker
  suspended the task or made it wait: that worker may have died between its save and its
  send, so the current continuation is sent again (RESEND; duplicates are fenced like any
  other); and a wake for a waiting task, which is a hint whatever its generation: its sender
  read the record before the task's last hop, so the task's inbox is looked at (CHECK_INBOX);
  and the message a running record's lease was taken for (a wake claims whatever its
  generation): it stands for the current generation, as below, else a worker that died
  after such a claim would leave the task with no message at all;
- a message for the current generation runs (RUN), unless a live lease holds the record: if
  the lease was taken for this very message, SQS redelivered it early (RETRY_LATER); else it
  is a duplicate that the holder's own message covers (DUPLICATE).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from continuum._record.continuation import Continuation
from continuum._record.model import Status, TaskRecord


class Verdict(StrEnum):
    """What to do with a continuation (the values are the worker's logged outcomes)."""

    RUN = "run"
    FINISHED = "finished"
    FUTURE = "rejected"
    STALE = "stale"
    RESEND = "stale-resent"
    DUPLICATE = "duplicate"
    RETRY_LATER = "lease-held"
    CHECK_INBOX = "check-inbox"

    @property
    def acknowledged(self) -> bool:
        """Whether the message is done with (deleted) after this verdict."""
        return self is not Verdict.RETRY_LATER


def fence(record: TaskRecord, message: Continuation, *, message_id: str, now: datetime) -> Verdict:
    """The verdict on ``message`` (SQS id ``message_id``) for ``record`` at ``now``."""
    if record.status.finished:
        return Verdict.FINISHED
    if message.generation > record.generation:
        return Verdict.FUTURE
    lease = record.lease
    claimed_by_it = lease is not None and lease.message_id == message_id
    if message.generation < record.generation and not (
        record.status == Status.RUNNING and claimed_by_it
    ):
        parked = record.status in (Status.SUSPENDED, Status.WAITING)
        if parked and record.suspended_by == message_id:
            return Verdict.RESEND
        if record.status == Status.WAITING and message.kind == "wake":
            return Verdict.CHECK_INBOX
        return Verdict.STALE
    if record.status == Status.RUNNING and lease is not None and lease.expires_at > now:
        if lease.message_id == message_id:
            return Verdict.RETRY_LATER
        return Verdict.DUPLICATE
    return Verdict.RUN
