"""One continuation in: parse, fence, claim, run turns, then suspend or finish.

The protocol (DESIGN.md, "The continuation message"):

1. Read the record (or, in a warm worker, remember the one it just suspended). A message for
   an older generation is stale: acknowledge it; if it is the very message whose worker
   suspended the task, that worker may have died before sending, so send the current
   continuation again first (duplicates are harmless). A finished task's message is
   acknowledged; a message from a generation the record never reached is rejected.
2. Claim: compare-and-swap the record to ``running`` with a lease until this invocation's
   deadline. Losing the swap means another worker has it: acknowledge. A live lease held by a
   worker processing this very message means SQS redelivered it early: retry later.
3. Run turns, saving the journal by policy.
4. Suspend: write the record (generation + 1) first, then send the continuation, then
   acknowledge. Never the other way round: a message must never point at a record that
   does not exist yet. Finish: write ``succeeded`` or ``failed`` and acknowledge.

A worker that dies anywhere leaves its message in flight; it reappears after its visibility
timeout, which the claim shortened to just past this invocation's deadline.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import BotoCoreError, ClientError

from continuum.budget import Budget, observe
from continuum.errors import (
    BadMessageError,
    ContinuumError,
    InvalidTaskIdError,
    LeaseHeldError,
    PayloadTooLargeError,
    RecordConflictError,
    RecordCorruptError,
    RecordNotFoundError,
)
from continuum.record import (
    Continuation,
    ErrorInfo,
    Lease,
    Status,
    TaskRecord,
    utcnow,
)
from continuum.signals import Abort, Fenced
from continuum.turns import TurnLoop

if TYPE_CHECKING:
    from continuum.app import Continuum

logger = Logger(service="continuum")

#: How many suspended records a worker remembers (see RecentRecords).
RECENT_RECORDS = 8


def process_sqs_batch(
    event: dict[str, Any], context: Any, handle_record: Callable[[SQSRecord], str]
) -> dict[str, Any]:
    """Run ``handle_record`` on each message of an SQS batch (Powertools BatchProcessor).

    A message whose handler raises is reported in ``batchItemFailures`` and retried by SQS;
    it never fails its neighbours, and the whole batch never raises.
    """
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(
        event=event, record_handler=handle_record, processor=processor, context=context
    )
    return dict(response)


@dataclass(frozen=True)
class Delivery:
    """One SQS message as the worker sees it."""

    body: str
    message_id: str
    receipt_handle: str | None = None
    receive_count: int = 1


class _StaleMemory(Exception):
    """The record this worker remembered has been changed by someone else."""


class RecentRecords:
    """The records this worker suspended last, kept to save a GET on their continuation.

    A warm Lambda environment often receives the continuation of the task it just suspended.
    It then knows the stored record exactly (it wrote it) and can claim it directly: the
    claim's ``If-Match`` on the remembered etag proves the record has not changed since, and
    a 412 sends the worker back to reading it. Only a continuation for exactly the remembered
    generation of a suspended record is served from memory; anything else reads S3.
    """

    def __init__(self, size: int = RECENT_RECORDS) -> None:
        self.size = size
        self._records: dict[str, tuple[TaskRecord, str]] = {}
        self._sends: dict[str, float] = {}

    def keep(self, record: TaskRecord, etag: str, *, send_s: float) -> None:
        for kept in (self._records, self._sends):
            kept.pop(record.task_id, None)
        self._records[record.task_id] = (record, etag)
        self._sends[record.task_id] = send_s
        for kept in (self._records, self._sends):
            while len(kept) > self.size:
                del kept[next(iter(kept))]

    def last_send_s(self, task_id: str) -> float | None:
        """How long this worker's last send of the task's continuation took, once."""
        return self._sends.pop(task_id, None)

    def take(self, message: Continuation) -> tuple[TaskRecord, str] | None:
        mine = self._records.pop(message.task_id, None)
        if mine is None:
            return None
        record, _etag = mine
        if record.status != Status.SUSPENDED or record.generation != message.generation:
            return None
        return mine


class OutcomeMetrics:
    """Counts what happened to each message as CloudWatch metrics (Powertools, EMF).

    Off unless ``POWERTOOLS_METRICS_NAMESPACE`` is set (the SAM template sets it), so local
    runs and tests print no metric lines. Metric names are the outcomes of
    ``Worker.process``: ``suspended``, ``succeeded``, ``failed``, ``stale``, ``fenced``, ...
    """

    def __init__(self) -> None:
        self._metrics: Any = None
        if os.environ.get("POWERTOOLS_METRICS_NAMESPACE"):
            from aws_lambda_powertools import Metrics

            self._metrics = Metrics(service="continuum")

    def count(self, outcome: str) -> None:
        if self._metrics is not None:
            from aws_lambda_powertools.metrics import MetricUnit

            self._metrics.add_metric(name=outcome, unit=MetricUnit.Count, value=1)

    def flush(self) -> None:
        if self._metrics is not None:
            self._metrics.flush_metrics(raise_on_empty_metrics=False)


class Worker:
    """Processes continuation messages for one app."""

    def __init__(self, app: Continuum) -> None:
        self.app = app
        self.recent = RecentRecords()
        self.metrics = OutcomeMetrics()

    def handle_batch(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Process an SQS batch; failed messages are reported, never fail their neighbours."""

        def handle_record(record: SQSRecord) -> str:
            delivery = Delivery(
                body=record.body,
                message_id=record.message_id,
                receipt_handle=record.receipt_handle,
                receive_count=int(record.attributes.approximate_receive_count or 1),
            )
            outcome = self.process(delivery, context)
            self.metrics.count(outcome)
            return outcome

        try:
            return process_sqs_batch(event, context, handle_record)
        finally:
            self.metrics.flush()

    def process(self, delivery: Delivery, context: Any) -> str:
        """Process one message; return what happened. Raise only to have it retried."""
        logger.remove_keys(["task_id", "generation"])
        logger.set_correlation_id(None)
        try:
            message = self.app.queue.parse(delivery.body)
        except (BadMessageError, InvalidTaskIdError) as exc:
            # Retrying cannot fix a malformed message: acknowledge and say why.
            logger.error(f"rejected a message: {exc}", extra={"message_id": delivery.message_id})
            return "rejected"
        logger.set_correlation_id(message.task_id)
        logger.append_keys(task_id=message.task_id, generation=message.generation)
        try:
            return self._process(message, delivery, context)
        except RecordConflictError:
            logger.info("another worker moved the record; stopping")
            return "fenced"

    def _process(self, message: Continuation, delivery: Delivery, context: Any) -> str:
        mine = self.recent.take(message)
        if mine is not None:
            try:
                return self._run(message, delivery, context, *mine, from_memory=True)
            except _StaleMemory:
                logger.info("the record moved since this worker last wrote it; reading it")
        try:
            record, etag = self.app.store.load(message.task_id)
        except RecordNotFoundError as exc:
            logger.error(f"no record for this continuation: {exc}")
            return "rejected"
        except RecordCorruptError as exc:
            # Retrying cannot repair it; a person restores a good version (bucket versioning
            # keeps them all) and resumes the task.
            logger.error(f"the record does not parse: {exc}")
            return "rejected"
        return self._run(message, delivery, context, record, etag, from_memory=False)

    def _run(
        self,
        message: Continuation,
        delivery: Delivery,
        context: Any,
        record: TaskRecord,
        etag: str,
        *,
        from_memory: bool,
    ) -> str:
        verdict = self._fence(record, message, delivery)
        if verdict is not None:
            return verdict

        task = self.app.tasks.get(record.task_name)
        if task is None:
            known = ", ".join(sorted(self.app.tasks)) or "none"
            error = ErrorInfo(
                type="UnknownTaskError",
                message=f"this app has no task named {record.task_name!r} (it has: {known})",
            )
            self._finish(record, etag, Status.FAILED, error=error)
            return "failed"

        remaining_s = _remaining_s(context)
        try:
            etag = self._claim(record, etag, delivery, context, remaining_s)
        except RecordConflictError:
            if from_memory:
                raise _StaleMemory from None
            raise
        lease = record.lease
        if delivery.receipt_handle is not None and self.app.visibility_margin_s is not None:
            self._shorten_visibility(delivery.receipt_handle, remaining_s)

        # -- run turns -----------------------------------------------------------------------
        app = self.app
        budget = Budget(
            remaining=lambda: _remaining_s(context),
            confidence=task.confidence if task.confidence is not None else app.confidence,
            margin_s=task.safety_margin_s
            if task.safety_margin_s is not None
            else app.safety_margin_s,
            default_step_s=app.default_step_s,
            preemptible_confidence=app.preemptible_confidence,
            send_stats=record.send_stats,
        )
        current = {"etag": etag}

        def persist() -> None:
            try:
                current["etag"] = self._write(record, current["etag"], lease=lease)
            except RecordConflictError as exc:
                raise Fenced from exc
            except PayloadTooLargeError as exc:
                raise Abort(_error_info(exc, record)) from exc
            except (ClientError, BotoCoreError) as exc:
                # Saving the journal early only limits what a crash would redo. The journal
                # stays in memory and is saved at the next chance (a later step, the
                # suspension or the finish); failing the task here would lose it all.
                logger.warning(f"could not save the journal; continuing: {exc}")

        loop = TurnLoop(
            task,
            record,
            budget,
            persist,
            app.persist_every_s,
            max_step_crashes=app.max_step_crashes,
        )
        outcome = loop.run()
        etag = current["etag"]
        record.idle_suspensions = 0 if loop.progress else record.idle_suspensions + 1

        if outcome.kind == "fenced":
            logger.info("another worker moved the record; stopping")
            return "fenced"
        if outcome.kind == "failed":
            assert outcome.error is not None
            logger.warning(
                f"task failed: {outcome.error.message}", extra={"error": outcome.error.model_dump()}
            )
            self._finish(record, etag, Status.FAILED, error=outcome.error, lease=lease)
            return "failed"
        if outcome.kind == "finished":
            self._finish(record, etag, Status.SUCCEEDED, lease=lease)
            logger.info("task succeeded")
            return "succeeded"
        return self._suspend(
            record,
            etag,
            outcome.reason or "budget",
            task.max_continuations,
            lease=lease,
            message_id=delivery.message_id,
        )

    def _claim(
        self, record: TaskRecord, etag: str, delivery: Delivery, context: Any, remaining_s: float
    ) -> str:
        """Take the record with a lease until this invocation's deadline (compare-and-swap)."""
        if record.status == Status.RUNNING:
            note_death(record)  # the lease expired with the task running: its worker died
        send_s = self.recent.last_send_s(record.task_id)
        if send_s is not None:
            # The send that suspended the task happened after its record was written: learn
            # its duration now, when this worker (which made it) claims the continuation.
            observe(record.send_stats, send_s)
        record.status = Status.RUNNING
        record.lease = Lease(
            owner=_owner(context),
            expires_at=utcnow() + timedelta(seconds=remaining_s),
            message_id=delivery.message_id,
        )
        record.counters.invocations += 1
        record.invocation_budget_s = max(record.invocation_budget_s, round(remaining_s, 3))
        return self._write(record, etag)

    def _shorten_visibility(self, receipt_handle: str, remaining_s: float) -> None:
        """If this invocation dies, its message should come back just after its deadline,
        not after the queue's visibility timeout (six times the function timeout)."""
        margin_s = self.app.visibility_margin_s or 0
        try:
            self.app.queue.extend(
                receipt_handle=receipt_handle, visibility_s=math.ceil(remaining_s) + margin_s
            )
        except ClientError as exc:
            # Only recovery speed depends on it: the record still fences every delivery.
            logger.warning("could not shorten the message's visibility", extra={"error": str(exc)})

    # -- the fence ---------------------------------------------------------------------------

    def _fence(self, record: TaskRecord, message: Continuation, delivery: Delivery) -> str | None:
        """Decide whether this message may run the task; a string says why not."""
        if record.status.finished:
            return "finished"
        if message.generation > record.generation:
            logger.error(
                "message names a generation the record has not reached",
                extra={"record_generation": record.generation},
            )
            return "rejected"
        if message.generation < record.generation:
            if record.status == Status.SUSPENDED and record.suspended_by == delivery.message_id:
                # This is the very message whose worker suspended the task: that worker may
                # have died between writing the record and sending the next continuation, so
                # send it (again; a duplicate is fenced like any other). Other stale copies
                # are only acknowledged: resending for each would multiply duplicates.
                self.app.queue.send(
                    task_id=record.task_id, generation=record.generation, reason="resend"
                )
                return "stale-resent"
            return "stale"
        lease = record.lease
        if record.status == Status.RUNNING and lease and lease.expires_at > utcnow():
            if lease.message_id == delivery.message_id:
                raise LeaseHeldError(
                    "a live worker is processing this message; retry after its lease",
                    task_id=record.task_id,
                    generation=record.generation,
                )
            # A duplicate of the message the lease holder is processing: that message stays
            # in flight until the holder is done, and covers a crash on its own.
            return "duplicate"
        return None

    # -- writes ------------------------------------------------------------------------------

    def _write(self, record: TaskRecord, etag: str, *, lease: Lease | None = None) -> str:
        started = time.monotonic()
        new_etag = self._replace(record, etag, lease=lease)
        observe(record.save_stats, time.monotonic() - started)
        record.counters.saves += 1
        record.counters.bytes_saved += self.app.store.last_record_bytes
        return new_etag

    def _replace(
        self, record: TaskRecord, etag: str, *, lease: Lease | None, finished: bool = False
    ) -> str:
        """Compare-and-swap, knowing that an earlier write of ours may have landed unseen.

        A write that failed with a transient error may still have landed; our etag is then
        stale and the next write answers 412. If the stored record still carries the lease
        of this very claim, no one else has written it since: adopt its etag and write again.
        """
        store = self.app.store
        try:
            return store.replace(record, etag=etag, finished=finished)
        except RecordConflictError:
            if lease is None:
                raise
            stored, stored_etag = store.load(record.task_id)
            if stored.lease != lease:
                raise
            return store.replace(record, etag=stored_etag, finished=finished)

    def _suspend(
        self,
        record: TaskRecord,
        etag: str,
        reason: str,
        max_continuations: int,
        *,
        lease: Lease | None,
        message_id: str,
    ) -> str:
        """Write the record (generation + 1), then send its continuation. Never the reverse."""
        if record.counters.continuations >= max_continuations:
            return self._give_up(
                record,
                etag,
                lease,
                "MaxContinuationsExceeded",
                f"the task continued {record.counters.continuations} times; "
                f"the limit is {max_continuations}",
            )
        if record.idle_suspensions >= self.app.max_idle_suspensions:
            return self._give_up(
                record,
                etag,
                lease,
                "NoProgress",
                f"the task suspended {record.idle_suspensions} times in a row "
                f"without completing a step; last: {reason}",
            )
        record.status = Status.SUSPENDED
        record.generation += 1
        record.lease = None
        record.suspend_reason = reason
        record.counters.continuations += 1
        calm(record)
        record.suspended_by = message_id
        try:
            etag = self._write(record, etag, lease=lease)
        except PayloadTooLargeError as exc:
            return self._give_up(record, etag, lease, "PayloadTooLargeError", exc.message)
        started = time.monotonic()
        self.app.queue.send(task_id=record.task_id, generation=record.generation, reason=reason)
        self.recent.keep(record, etag, send_s=time.monotonic() - started)
        logger.info(
            f"task suspended: {reason}",
            extra={"turn": record.turn, "next_generation": record.generation},
        )
        return "suspended"

    def _give_up(
        self, record: TaskRecord, etag: str, lease: Lease | None, kind: str, message: str
    ) -> str:
        error = ErrorInfo(type=kind, message=message, turn=record.turn)
        logger.warning(f"task failed: {message}")
        self._finish(record, etag, Status.FAILED, error=error, lease=lease)
        return "failed"

    def _finish(
        self,
        record: TaskRecord,
        etag: str,
        status: Status,
        *,
        error: ErrorInfo | None = None,
        lease: Lease | None = None,
    ) -> None:
        record.status = status
        record.error = error
        record.lease = None
        calm(record)
        record.finished_at = utcnow()
        if status == Status.FAILED:
            record.result = None
        try:
            self._replace(record, etag, lease=lease, finished=True)
        except PayloadTooLargeError as exc:
            # Keep the record readable: drop the oversized parts and say what they were.
            record.status, record.result, record.journal = Status.FAILED, None, []
            if "the state" in exc.message:
                record.state = None
            record.error = _error_info(exc, record)
            self._replace(record, etag, lease=lease, finished=True)


def note_death(record: TaskRecord) -> None:
    """Account for a worker that died holding the record.

    Only a death while a marked step was running counts against that step; a step that
    kills its worker every time then fails the task after ``max_step_crashes`` deaths
    instead of looping. Deaths elsewhere (during a claim or a save) blame no step. Either
    way, the next workers run carefully until the task suspends (see ``TaskRecord.careful``).
    """
    marker = record.running_step
    if marker is not None:
        record.crashes = record.crashes + 1 if record.crash_at == marker else 1
        record.crash_at = marker
    record.running_step = None
    record.careful = True
    record.counters.recoveries += 1


def calm(record: TaskRecord) -> None:
    """The task suspended or finished: leave careful mode and forget past deaths."""
    record.careful, record.running_step = False, None
    record.crashes, record.crash_at = 0, None


def _error_info(exc: ContinuumError, record: TaskRecord) -> ErrorInfo:
    return ErrorInfo(type=type(exc).__name__, message=exc.message, step=exc.step, turn=record.turn)


def _remaining_s(context: Any) -> float:
    """Seconds left in this invocation, from the Lambda context."""
    if context is None:
        raise ContinuumError("the handler needs the Lambda context to know its deadline")
    return float(context.get_remaining_time_in_millis()) / 1000.0


def _owner(context: Any) -> str:
    return str(getattr(context, "aws_request_id", None) or "local")
