"""The dead-letter queue: continuations that kept failing end here, and their tasks fail.

SQS moves a message to the dead-letter queue after ``maxReceiveCount`` receives without a
successful acknowledgement: its workers died, or kept raising. Rather than leave the task
waiting for a message that will never come, mark it ``failed`` with the reason — never
silently lost. A message whose task has moved on (a newer generation, a live lease, a finished
task) is a harmless leftover and is only acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from continuum.errors import (
    BadMessageError,
    InvalidTaskIdError,
    RecordConflictError,
    RecordCorruptError,
    RecordNotFoundError,
)
from continuum.record import ErrorInfo, Status, utcnow
from continuum.worker import logger, process_sqs_batch

if TYPE_CHECKING:
    from continuum.app import Continuum

#: A 412 here means a worker moved the record meanwhile; look again this many times.
CONFLICT_RETRIES = 3


class DeadLetters:
    """Marks the tasks of dead-lettered continuations ``failed``."""

    def __init__(self, app: Continuum) -> None:
        self.app = app

    def handle_batch(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        def handle_record(record: SQSRecord) -> str:
            count = int(record.attributes.approximate_receive_count or 0)
            return self.process(record.body, receive_count=count)

        return process_sqs_batch(event, context, handle_record)

    def process(self, body: str, *, receive_count: int) -> str:
        """Fail the task of one dead-lettered message; return what happened."""
        try:
            message = self.app.queue.parse(body)
        except (BadMessageError, InvalidTaskIdError) as exc:
            logger.error(f"dead letter is not a continuation: {exc}")
            return "rejected"
        store = self.app.store
        for _ in range(CONFLICT_RETRIES):
            try:
                record, etag = store.load(message.task_id)
            except (RecordNotFoundError, RecordCorruptError) as exc:
                logger.error(f"dead letter for a task that cannot be read: {exc}")
                return "rejected"
            if record.status.finished or record.generation != message.generation:
                return "leftover"
            lease = record.lease
            if record.status == Status.RUNNING and lease and lease.expires_at > utcnow():
                return "leftover"  # a live worker has it and will send what comes next
            last = ""
            if lease is not None:
                last = f"; last claimed by {lease.owner} until {lease.expires_at.isoformat()}"
            if record.crashes:
                last += (
                    f"; its worker died {record.crashes} times at step position {record.crash_at}"
                )
            record.status = Status.FAILED
            record.lease = None
            record.finished_at = utcnow()
            record.error = ErrorInfo(
                type="DeadLettered",
                message=(
                    f"the continuation for generation {message.generation} was received "
                    f"{receive_count} times without completing and went to the dead-letter "
                    f"queue{last}"
                ),
                turn=record.turn,
            )
            try:
                store.replace(record, etag=etag, finished=True)
            except RecordConflictError:
                continue
            logger.warning(
                f"task failed: {record.error.message}", extra={"task_id": record.task_id}
            )
            return "failed"
        raise RecordConflictError(
            "the record kept changing while failing a dead letter", task_id=message.task_id
        )
