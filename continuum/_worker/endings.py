"""How one invocation's hold on a task ends: suspended, waiting, hopped, or finished.

Each ending writes the record first and sends the continuation after (``claim.py`` makes the
writes), never the other way round, so a message never names a record that does not exist:

- **suspend**: generation + 1, ``suspended``; then the continuation (delayed for a retry's
  backoff). A task over its limits (continuations, suspensions without progress) fails instead.
- **wait**: generation + 1, ``waiting`` with what it waits for; then one more look at the
  inbox, and a wake now or the timer for the earliest deadline (``waiting.after_wait``).
- **hop**: a waiting task's timer came before its deadline (a long sleep): generation + 1,
  still ``waiting``, and the next timer. No user code runs; no lease is taken.
- **finish**: first the inbox is closed to cancel requests (a request that came before the
  close makes the task end ``cancelled``, whatever its turn did); then ``succeeded``,
  ``failed`` or ``cancelled``; then the sweep: blobs and inbox
  tagged for expiry (or deleted), the record tagged last (``sweeping.py``).
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from continuum._base.clock import now_s
from continuum._define.observers import Observers
from continuum._define.settings import Settings
from continuum._fanout.child_tasks import ChildTasks, cancel_children, report_to_parent
from continuum._record.continuation import Continuation, Continuations
from continuum._record.history import Usage, bill
from continuum._record.model import ErrorInfo, Status, TaskRecord
from continuum._record.persistence import Records
from continuum._record.waiting_for import Waiter
from continuum._turn.tasks import Task
from continuum._waits.kinds.registry import unknown_kinds
from continuum._worker.claim import Claim
from continuum._worker.fence import Verdict
from continuum._worker.long_waits import LongWaits, plan
from continuum._worker.sqs_batch import logger
from continuum._worker.wake import after_wait, timer_delay_s
from continuum._worker.warm_cache import RecentRecords
from continuum.errors import (
    ContinuumError,
    LeaseHeldError,
    PayloadTooLargeError,
    RecordTooNewError,
)

if TYPE_CHECKING:
    from continuum._record.inbox_items import CancelRequest

#: The reason of a message a worker left for a newer one; it is sent again every 15 minutes
#: for as long as the record is kept (logged as an error once a day).
LEFT_FOR_NEWER = "left for a newer worker"
LEFT_FOR_NEWER_LOG_EVERY = 24 * 4


def _left_count(reason: str) -> int:
    if not reason.startswith(LEFT_FOR_NEWER):
        return 0
    digits = reason[len(LEFT_FOR_NEWER) :].strip(" ()")
    return int(digits) if digits.isdigit() else 0


class Outcome(StrEnum):
    """What happened to one message (logged, and counted as a metric)."""

    SUSPENDED = "suspended"
    WAITING = "waiting"
    HOPPED = "hopped"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    FENCED = "fenced"
    REJECTED = "rejected"
    FINISHED = "finished"
    SWEPT = "finished-swept"  # a message of a finished task completed its sweep
    STALE = "stale"
    RESENT = "stale-resent"
    DUPLICATE = "duplicate"
    IGNORED = "wake-ignored"
    LEFT = "left-for-newer"
    STARTED = "schedule-started"  # a recurring schedule's fire started its run
    SKIPPED = "schedule-skipped"  # ... or not: the previous run had not finished


class Endings:
    """The endings of invocations: the writes and sends that hand a task on.

    Args:
        records: where the records (and their inboxes) are.
        continuations: where continuations are sent.
        settings: the limits (idle suspensions).
        recent: the records this worker parked last (a warm claim or hop skips their GET).
    """

    def __init__(
        self,
        records: Records,
        continuations: Continuations,
        settings: Settings,
        recent: RecentRecords,
        observers: Observers | None = None,
        children: ChildTasks | None = None,
        long_waits: LongWaits | None = None,
    ) -> None:
        self.records = records
        self.continuations = continuations
        self.settings = settings
        self.recent = recent
        self.observers = observers if observers is not None else Observers()
        self.children = children
        #: hands deadlines past one delayed message to the scheduler (None: they hop).
        self.long_waits = long_waits

    def suspend(
        self, claim: Claim, reason: str, *, delay_s: float, message_id: str, limit: int
    ) -> Outcome:
        record = claim.record
        if record.counters.continuations >= limit:
            return self.give_up(
                claim,
                "MaxContinuationsExceeded",
                f"the task continued {record.counters.continuations} times; the limit is {limit}",
            )
        if record.idle_suspensions >= self.settings.max_idle_suspensions:
            return self.give_up(
                claim,
                "NoProgress",
                f"the task suspended {record.idle_suspensions} times in a row "
                f"without completing a step; last: {reason}",
            )
        try:
            send_s = claim.suspend(
                reason,
                message_id=message_id,
                continuations=self.continuations,
                delay_s=delay_s,
                long_waits=self.long_waits,
            )
        except PayloadTooLargeError as exc:
            return self.give_up(claim, "PayloadTooLargeError", exc.message)
        self.recent.keep(record, claim.revision, send_s=send_s)
        self._parked(record, reason)
        logger.info(
            f"task suspended: {reason}",
            extra={"turn": record.turn, "next_generation": record.generation},
        )
        return Outcome.SUSPENDED

    def wait(self, claim: Claim, waiters: list[Waiter], reason: str, *, message_id: str) -> Outcome:
        record = claim.record
        record.idle_suspensions = 0
        try:
            reach_s = self.long_waits.reach_s if self.long_waits is not None else None
            claim.wait(waiters, reason, message_id=message_id, reach_s=reach_s)
        except PayloadTooLargeError as exc:
            return self.give_up(claim, "PayloadTooLargeError", exc.message)
        sent = self.resume_waiting(record)
        self.recent.keep(record, claim.revision)  # its first timer may come back here
        self._parked(record, reason)
        logger.info(
            f"task waiting: {reason}",
            extra={"next_generation": record.generation, "wake_at": str(record.wake_at)},
        )
        logger.debug(f"after waiting: {sent}")
        return Outcome.WAITING

    def hop(
        self,
        record: TaskRecord,
        revision: str,
        *,
        message_id: str,
        spent: Usage,
        elapsed_s: float,
        memory_mb: int,
        fired: bool = False,
    ) -> Outcome:
        """The timer of a long wait came early (a hop's, or a schedule's fire): move the
        record on one generation, send the next timer (or hand it to a schedule, if it is
        still past one delayed message). A suspended record's fire (a retry's long backoff)
        hops alike, its next message the continuation. The hop counts on the run that began
        the wait, and in the task's cost. Unless the message is that schedule's ``fired``
        (it deleted itself), the schedule the record named is deleted: its create may have
        failed, then landed after all from a redelivery's re-send.

        Raises:
            RecordConflictError: another writer moved the record; nothing was sent.
        """
        replaced = None if fired else record.schedule
        record.generation += 1
        record.suspended_by = message_id
        record.counters.hops += 1
        reach_s = self.long_waits.reach_s if self.long_waits is not None else None
        plan(record, now=now_s(), reach_s=reach_s)
        usage = dataclasses.replace(spent)
        usage.s3_put, usage.sqs_send = usage.s3_put + 1, 1
        bill(usage, elapsed_s, memory_mb)
        record.usage.add(usage)
        if record.history:
            record.history[-1].hops += 1
        # A conflict (412) is the caller's: its record may have come from memory.
        revision = self.records.swap(record, revision=revision)
        if replaced is not None and self.long_waits is not None:
            self.long_waits.forget(replaced, task_id=record.task_id)  # before the next timer
        if record.status == Status.WAITING:
            after_wait(
                record,
                self.records.inbox,
                self.continuations,
                max_delay_s=self.continuations.queue.max_delay_s,
                look=False,
                long_waits=self.long_waits,
            )
        else:
            send_delayed(record, self.continuations, self.long_waits)
        self.recent.keep(record, revision)
        return Outcome.HOPPED

    def resume_waiting(self, record: TaskRecord) -> str:
        """Send what continues a waiting record: a wake, its timer, or nothing."""
        return resume_waiting(record, self.records, self.continuations, self.long_waits)

    def fenced(self, verdict: Verdict, record: TaskRecord) -> Outcome:
        """Act on a verdict of the fence that runs nothing (not RUN, nor CHECK_INBOX)."""
        match verdict:
            case Verdict.RETRY_LATER:
                raise LeaseHeldError(
                    "a live worker is processing this message; retry after its lease",
                    task_id=record.task_id,
                    generation=record.generation,
                )
            case Verdict.RESEND:
                # The worker that suspended the task (or made it wait) may have died before
                # sending; send again (a duplicate is fenced like any other).
                resend(record, self.records, self.continuations, long_waits=self.long_waits)
                return Outcome.RESENT
            case Verdict.FINISHED:
                # Its worker may have died after the finish write: a cancelled parent cancels
                # its children again, a child reports again (idempotent), and a sweep cut
                # short is finished (else it raises, and the message comes back).
                cancel_children(self.children, record)
                report_to_parent(self.records, self.continuations, record, again=True)
                swept = self.records.ensure_swept(record)
                return Outcome.SWEPT if swept else Outcome.FINISHED
            case Verdict.FUTURE:
                logger.error(
                    "message names a generation the record has not reached",
                    extra={"record_generation": record.generation},
                )
                return Outcome.REJECTED
        return Outcome(verdict.value)

    def leave_for_newer(self, message: Continuation, exc: RecordTooNewError) -> Outcome:
        """A newer continuum (or newer task code) wrote the record: leave it untouched, and
        send this message again in 15 minutes, so that once the newer code is deployed (a
        rollback rolled forward) it continues the task, however long the rollback lasts (a
        record that is gone ends the chain: its message is rejected)."""
        hops = _left_count(message.reason)
        days = hops / LEFT_FOR_NEWER_LOG_EVERY
        log = logger.error if hops % LEFT_FOR_NEWER_LOG_EVERY == 0 else logger.info
        log(f"left for a newer worker (for {days:.1f} days): {exc}")
        self.continuations.send(
            message.task_id,
            generation=message.generation,
            reason=f"{LEFT_FOR_NEWER} ({hops + 1})",
            delay_s=self.continuations.queue.max_delay_s,
            kind=message.kind,
        )
        return Outcome.LEFT

    def _parked(self, record: TaskRecord, reason: str) -> None:
        if self.observers.wants("task_parked"):
            from continuum._define.events import TaskParked

            self.observers.emit(
                "task_parked",
                TaskParked(
                    task_id=record.task_id,
                    task_name=record.task_name,
                    status=record.status.value,
                    generation=record.generation,
                    reason=reason,
                ),
            )

    def finish(self, claim: Claim, status: Status, error: ErrorInfo | None = None) -> Outcome:
        if status != Status.CANCELLED:
            # A cancel accepted before this close wins, however the task ended; one after it
            # is refused (``client.cancel`` says so): the two race on one inbox key.
            request = self.records.inbox.close_to_cancel(claim.record.task_id)
            if request is not None:
                status, error = Status.CANCELLED, cancelled_error(request, claim.record.turn)
        claim.finish(status, error=error)
        record = claim.record
        cancel_children(self.children, record)
        report_to_parent(self.records, self.continuations, record)
        if self.observers.wants("task_finished"):
            from continuum._define.events import TaskFinished

            self.observers.emit(
                "task_finished",
                TaskFinished(
                    task_id=record.task_id,
                    task_name=record.task_name,
                    status=record.status.value,
                    error_type=record.error.type if record.error else None,
                    error=record.error.message if record.error else None,
                    created_at=record.created_at.timestamp(),
                    finished_at=(record.finished_at or record.updated_at).timestamp(),
                    retries=record.counters.retries,
                ),
            )
        if error is not None:
            where = f"\n{error.traceback}" if error.traceback else ""
            logger.warning(
                f"task {status.value}: {error.message}{where}", extra={"error": error.model_dump()}
            )
        else:
            logger.info(f"task {status.value}")
        return Outcome(status.value)

    def give_up(self, claim: Claim, kind: str, message: str) -> Outcome:
        error = ErrorInfo(type=kind, message=message, turn=claim.record.turn)
        return self.finish(claim, Status.FAILED, error)


def cancelled_error(request: CancelRequest, turn: int) -> ErrorInfo:
    """The error of a task that ends cancelled by ``request``."""
    reason = request.reason
    text = f"the task was cancelled{f': {reason}' if reason else ''}"
    return ErrorInfo(type="TaskCancelledError", message=text, turn=turn)


def too_new_for(task: Task[Any] | None, record: TaskRecord) -> RecordTooNewError | None:
    """Why ``task`` (this worker's code) must leave ``record`` alone: a newer version of the
    task wrote it, or a newer continuum left it waiting on a kind of wait this one does not
    know (only that code can tell what answers it); None if it may run it."""
    waiting = record.waiting_for if record.status == Status.WAITING else []
    if unknown := unknown_kinds(w.kind for w in waiting):
        return RecordTooNewError(
            f"task {record.task_name!r} waits on a kind of wait this version of continuum "
            f"does not know: {', '.join(map(repr, unknown))}",
            task_id=record.task_id,
            hint="a newer continuum wrote it (or this one is a rollback): roll forward; the "
            "record is left untouched and its message comes back every 15 minutes",
        )
    if task is None or record.state_version <= task.version:
        return None
    return RecordTooNewError(
        f"the record's state version {record.state_version} is newer than task "
        f"{task.name!r} (version {task.version}) of this worker",
        task_id=record.task_id,
        hint="a newer deploy wrote it (or this one is a rollback): roll forward; the "
        "record is left untouched and its message comes back every 15 minutes",
    )


def resume_waiting(
    record: TaskRecord,
    records: Records,
    continuations: Continuations,
    long_waits: LongWaits | None = None,
) -> str:
    """Send what continues a waiting record: a wake, its timer (or schedule), or nothing."""
    return after_wait(
        record,
        records.inbox,
        continuations,
        max_delay_s=continuations.queue.max_delay_s,
        long_waits=long_waits,
    )


def send_delayed(
    record: TaskRecord, continuations: Continuations, long_waits: LongWaits | None
) -> str:
    """Send a suspended record's continuation for its ``wake_at`` (a retry's long backoff):
    the schedule the record names, else a message delayed as far as one reaches. Returns
    what was sent ("schedule" or "timer")."""
    if long_waits is not None and long_waits.hand_over(record, kind="timer"):
        return "schedule"
    delay = 0 if record.wake_at is None else timer_delay_s(record, now=now_s())
    delay = min(delay, continuations.queue.max_delay_s)
    continuations.send(
        record.task_id, generation=record.generation, reason="backoff", delay_s=delay
    )
    return "timer"


def resend(
    record: TaskRecord,
    records: Records,
    continuations: Continuations,
    *,
    reason: str = "resend",
    long_waits: LongWaits | None = None,
) -> None:
    """Send the current continuation of a suspended, waiting or pending record again (a
    long wait's schedule is created again: the same name, time and body, so no second one).
    A schedule created for a record that a hop moved on meanwhile is deleted at once: the
    hop, which deletes the schedule it replaces, came before it existed."""
    sent = None
    if record.status == Status.WAITING:
        sent = resume_waiting(record, records, continuations, long_waits)
    elif record.status == Status.SUSPENDED and record.schedule is not None:
        sent = send_delayed(record, continuations, long_waits)
    else:
        continuations.send(record.task_id, generation=record.generation, reason=reason)
    if sent == "schedule" and long_waits is not None:
        try:
            moved_on = records.load(record.task_id)[0].generation != record.generation
        except ContinuumError:
            return  # unknown: a fire that comes for a generation gone is fenced
        if moved_on:
            long_waits.forget(record.schedule, task_id=record.task_id)


def after_sweep(claim: Claim, outcome: Outcome) -> Outcome:
    """The invocation's outcome, unless it finished the task and its sweep did not complete:
    then raise, so that the message comes back and its next delivery sweeps again."""
    if claim.unswept is not None:
        logger.warning(f"task {outcome.value}; retrying the message to finish its sweep")
        raise claim.unswept
    return outcome
