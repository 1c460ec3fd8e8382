"""The dead-letter queue: continuations that kept failing end here; no task is stranded.

SQS moves a message to the dead-letter queue after ``maxReceiveCount`` receives without a
successful acknowledgement: its workers died, or kept raising. The handler fences the message
against the record as the worker does (``fence.py``), then:

- the message still names the task's current generation and no live worker holds it: the
  task cannot progress, so it is marked ``failed`` with the reason;
- it names an older generation: the task moved on, but the message that should continue it may
  be the one that failed (every send after a save failed, say), so the current continuation
  is sent again (a duplicate is harmless: the record fences it);
- a newer continuum wrote the record: it is left untouched and the message sent again (as
  the worker does), so that rolling forward still resumes the task;
- the task finished: its sweep may have been cut short (the message may be dead because
  of it), so it is finished unless the record's tags say it is done;
- the worker that claimed this very message still holds a live lease: it may be dead (its
  lease ends at its deadline) or slow, and no other message would continue the task, so the
  handler raises :class:`LeaseHeldError` and the dead letter comes back after its visibility
  timeout, to be decided once the lease is over;
- a live worker holds it under another message: nothing to do (that message continues it).

A sweep that does not complete here either raises :class:`SweepIncompleteError`, so that the
dead letter is delivered again (for as long as the dead-letter queue keeps it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from continuum._base.clock import utcnow
from continuum._fanout.child_tasks import report_to_parent
from continuum._record.continuation import Continuation, Continuations
from continuum._record.model import ErrorInfo, Status, TaskRecord
from continuum._record.persistence import Records
from continuum._record.recovery import end_recovery
from continuum._record.sweep import SweepIncompleteError
from continuum._worker.endings import LEFT_FOR_NEWER, cancelled_error, resend
from continuum._worker.fence import Verdict, fence
from continuum._worker.sqs_batch import Delivery, LambdaContext, logger, process_sqs_batch
from continuum.errors import (
    BadMessageError,
    InvalidTaskIdError,
    LeaseHeldError,
    RecordConflictError,
    RecordCorruptError,
    RecordNotFoundError,
    RecordTooNewError,
)

#: A 412 here means a worker moved the record meanwhile; look again this many times.
CONFLICT_RETRIES = 3


class DeadLetterOutcome(StrEnum):
    """What the dead-letter handler did with one message."""

    FAILED = "failed"
    RESENT = "resent"
    SWEPT = "swept"
    LEFTOVER = "leftover"
    REJECTED = "rejected"


class DeadLetters:
    """Fails, or continues again, the tasks of dead-lettered continuations."""

    def __init__(self, records: Records, continuations: Continuations) -> None:
        self.records = records
        self.continuations = continuations

    def handle_batch(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        def handle(delivery: Delivery) -> str:
            return self.process(delivery).value

        return process_sqs_batch(event, context, handle)

    def process(self, delivery: Delivery) -> DeadLetterOutcome:
        """Handle one dead-lettered message; return what happened."""
        try:
            message = self.continuations.parse(delivery.body)
        except (BadMessageError, InvalidTaskIdError) as exc:
            logger.error(f"dead letter is not a continuation: {exc}")
            return DeadLetterOutcome.REJECTED
        for _ in range(CONFLICT_RETRIES):
            try:
                record, revision = self.records.load(message.task_id)
            except RecordTooNewError as exc:
                return self._leave_for_newer(message, exc)
            except (RecordNotFoundError, RecordCorruptError) as exc:
                logger.error(f"dead letter for a task that cannot be read: {exc}")
                return DeadLetterOutcome.REJECTED
            judged = self._judge(message, delivery, record)
            if judged is not None:
                return judged
            failed = self._fail(message, delivery, record, revision)
            if failed is not None:
                return failed
        raise RecordConflictError(
            "the record kept changing while failing a dead letter", task_id=message.task_id
        )

    def _leave_for_newer(self, message: Continuation, exc: RecordTooNewError) -> DeadLetterOutcome:
        # Left as is, and its message kept going: it may be what resumes the task once the
        # newer code is back (its sends failed until it died here).
        logger.error(f"dead letter for a record a newer continuum wrote; resent: {exc}")
        self.continuations.send(
            message.task_id,
            generation=message.generation,
            reason=LEFT_FOR_NEWER,
            delay_s=self.continuations.queue.max_delay_s,
            kind=message.kind,
        )
        return DeadLetterOutcome.RESENT

    def _judge(
        self, message: Continuation, delivery: Delivery, record: TaskRecord
    ) -> DeadLetterOutcome | None:
        """Fence the dead letter as the worker does: what was done, or None if the task
        cannot progress and is to be failed."""
        verdict = fence(record, message, message_id=delivery.message_id, now=utcnow())
        match verdict:
            case Verdict.FUTURE:
                return DeadLetterOutcome.REJECTED
            case Verdict.STALE | Verdict.RESEND | Verdict.CHECK_INBOX:
                resend(record, self.records, self.continuations, reason="dead-letter-resend")
                logger.warning(
                    "dead letter of an older generation: sent the current continuation",
                    extra={"task_id": record.task_id, "generation": record.generation},
                )
                return DeadLetterOutcome.RESENT
            case Verdict.RUN:
                return None
            case Verdict.FINISHED:
                report_to_parent(self.records, self.continuations, record, again=True)
                swept = self.records.ensure_swept(record)
                return DeadLetterOutcome.SWEPT if swept else DeadLetterOutcome.LEFTOVER
            case Verdict.RETRY_LATER:
                # The worker that claimed this very message holds a live lease: dead or
                # slow, no one can tell yet, and no other message would continue the task.
                raise LeaseHeldError(
                    "the worker that claimed this dead letter's message still holds the "
                    "task's lease; the dead letter is decided after it",
                    task_id=record.task_id,
                    generation=record.generation,
                )
            case _:  # a live worker holds it under another message, which continues it
                return DeadLetterOutcome.LEFTOVER

    def _fail(
        self, message: Continuation, delivery: Delivery, record: TaskRecord, revision: str
    ) -> DeadLetterOutcome | None:
        """Write the task failed (cancelled, if a cancel came first) and report it to its
        parent; None if the record moved meanwhile."""
        record.error = dead_lettered(record, message, delivery)  # names the lease it ends
        record.status = Status.FAILED
        record.lease = None
        record.suspend_reason = None
        record.finished_at = utcnow()
        request = self.records.inbox.close_to_cancel(record.task_id)
        if request is not None:  # a cancel accepted before this finish wins, as in endings
            record.status = Status.CANCELLED
            record.error = cancelled_error(request, record.turn)
        end_recovery(record)
        unswept: SweepIncompleteError | None = None
        try:
            self.records.swap(record, revision=revision, finished=True)
        except RecordConflictError:
            return None
        except SweepIncompleteError as exc:
            unswept = exc
        logger.warning(
            f"task {record.status.value}: {record.error.message}",
            extra={"task_id": record.task_id},
        )
        report_to_parent(self.records, self.continuations, record)
        if unswept is not None:
            raise unswept  # the task failed; its dead letter comes back to finish the sweep
        return DeadLetterOutcome.FAILED


def dead_lettered(record: TaskRecord, message: Continuation, delivery: Delivery) -> ErrorInfo:
    """The error of a task whose continuation went to the dead-letter queue."""
    last = ""
    lease = record.lease
    if lease is not None:
        last = f"; last claimed by {lease.owner} until {lease.expires_at.isoformat()}"
    if record.crashes:
        last += f"; its worker died {record.crashes} times at step position {record.crash_at}"
    return ErrorInfo(
        type="DeadLettered",
        message=(
            f"the continuation for generation {message.generation} was received "
            f"{delivery.receive_count} times without completing and went to the "
            f"dead-letter queue{last}"
        ),
        turn=record.turn,
    )
