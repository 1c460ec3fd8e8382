"""A claim: one worker's hold on one record, from the claim to the suspension or the finish.

It owns the record's revision and this invocation's lease, and makes every write of the record
while it holds it, each a compare-and-swap. A write that lost (412) is checked once more: if
the stored record still carries this claim's lease, nobody else wrote it (an earlier write of
ours landed unseen, its answer lost), so the claim adopts the stored revision and writes again.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from continuum._base.clock import now_s, utcnow
from continuum._record.continuation import Continuations
from continuum._record.history import InvocationRun, RunClock, RunOutcome, Usage
from continuum._record.history import begin as begin_run
from continuum._record.history import end as end_run
from continuum._record.model import ErrorInfo, Lease, Status, TaskRecord
from continuum._record.persistence import Records
from continuum._record.recovery import end_recovery, note_death
from continuum._record.sweep import SweepIncompleteError
from continuum._record.waiting_for import Waiter, epoch_to_datetime
from continuum._steps.budget import observe
from continuum._steps.control_flow import Abort, Fenced, Suspend
from continuum._worker.long_waits import LongWaits, plan
from continuum._worker.wake import next_wake
from continuum.backends.store import StoreError
from continuum.errors import ContinuumError, PayloadTooLargeError, RecordConflictError

logger = logging.getLogger("continuum._worker.claim")


class Claim:
    """This worker's hold on a record.

    Example:
        >>> claim = Claim.take(records, record, revision, owner="req-1", message_id="m-1",
        ...                    remaining_s=900.0)  # doctest: +SKIP
        >>> claim.suspend("budget", message_id="m-1")  # doctest: +SKIP
    """

    def __init__(
        self,
        records: Records,
        record: TaskRecord,
        revision: str,
        lease: Lease,
        run: InvocationRun | None = None,
    ) -> None:
        self.records = records
        self.record = record
        self.revision = revision
        self.lease = lease
        #: this invocation's entry in ``record.history``, and what it has cost so far.
        self.run = run
        self.usage = Usage()
        self.clock = RunClock()
        self.memory_mb = 0
        #: the finish write landed but its sweep did not complete: the message must be retried.
        self.unswept: SweepIncompleteError | None = None
        #: the schedule the claimed record named (a long wait's), which nothing needs now.
        self.dropped_schedule: str | None = None
        self._counted_from = (record.counters.steps_executed, record.counters.steps_replayed)
        #: called after each write of the record that landed (an observer of what it holds).
        self.saved: Callable[[], None] | None = None

    @classmethod
    def take(
        cls,
        records: Records,
        record: TaskRecord,
        revision: str,
        *,
        owner: str,
        message_id: str,
        remaining_s: float,
        send_s: float | None = None,
        message_kind: str = "continue",
    ) -> Claim:
        """Claim: write the record ``running`` with a lease until this invocation's deadline,
        and begin this invocation's entry in the task's history.

        Raises:
            RecordConflictError: another worker moved the record first.
        """
        if record.status == Status.RUNNING:
            note_death(record)  # the lease expired with the task running: its worker died
        if send_s is not None:
            # The send that suspended the task happened after its record was written: learn
            # its duration now, when this worker (which made it) claims the continuation.
            observe(record.send_stats, send_s)
        lease = Lease(
            owner=owner,
            expires_at=utcnow() + timedelta(seconds=remaining_s),
            message_id=message_id,
        )
        record.status = Status.RUNNING
        record.lease = lease
        record.waiting_for, record.wake_at = [], None
        dropped, record.schedule = record.schedule, None
        record.counters.invocations += 1
        record.invocation_budget_s = max(record.invocation_budget_s, round(remaining_s, 3))
        run = begin_run(
            record.history,
            number=record.counters.invocations,
            generation=record.generation,
            message=message_kind,
            request_id=owner,
            turn=record.turn,
        )
        claim = cls(records, record, revision, lease, run)
        claim._write(own_lease=False)
        claim.dropped_schedule = dropped
        return claim

    # -- saves while running -----------------------------------------------------------------

    def save(self) -> None:
        """Save the journal now (the persistence policy calls this between steps).

        Raises:
            Fenced: another worker moved the record; stop at once.
            Abort: a value is over its size limit; the task must fail.
        """
        try:
            self._write()
        except RecordConflictError as exc:
            raise Fenced from exc
        except PayloadTooLargeError as exc:
            raise Abort(error_info(exc, self.record)) from exc
        except StoreError as exc:
            # Saving the journal early only limits what a crash would redo. The journal
            # stays in memory and is saved at the next chance (a later step, the
            # suspension or the finish); failing the task here would lose it all.
            logger.warning("could not save the journal; continuing: %s", exc)

    def save_strict(self) -> None:
        """Save now, or stop this invocation: for what must be stored before the task goes on.

        Raises:
            Fenced: another worker moved the record.
            Abort: a value is over its size limit.
            Suspend: the store failed; the task continues in a fresh invocation (whose
                suspension write saves what this one could not).
        """
        try:
            self._write()
        except RecordConflictError as exc:
            raise Fenced from exc
        except PayloadTooLargeError as exc:
            raise Abort(error_info(exc, self.record)) from exc
        except StoreError as exc:
            raise Suspend(f"could not save the record ({exc}); continuing afresh") from exc

    # -- the end of this invocation's hold -----------------------------------------------------

    def wait(
        self, waiters: list[Waiter], reason: str, *, message_id: str, reach_s: int | None = None
    ) -> None:
        """Wait: write the record ``waiting`` with generation + 1, what it waits for and until
        when. The caller then looks at the inbox and sends the timer (``waiting.after_wait``).
        A deadline further than ``reach_s`` (one delayed message; None: no scheduler) is
        named a schedule (``long_waits.plan``), which the caller creates.

        Raises:
            PayloadTooLargeError: the record cannot be saved (nothing was written).
        """
        record = self.record
        record.status = Status.WAITING
        record.generation += 1
        record.lease = None
        record.suspend_reason = reason
        record.suspended_by = message_id
        record.waiting_for = waiters
        now = now_s()
        record.wake_at = next_wake(waiters, now)
        plan(record, now=now, reach_s=reach_s)
        record.counters.waits += 1
        end_recovery(record)
        self.close(RunOutcome.WAITING, reason, waiting_for=waiters, then_sends=1, then_lists=1)
        self._write(handing_over=True)

    def suspend(
        self,
        reason: str,
        *,
        message_id: str,
        continuations: Continuations,
        delay_s: float = 0.0,
        long_waits: LongWaits | None = None,
    ) -> float:
        """Suspend: (1) write the record with generation + 1, (2) then send its continuation.
        Never the other way round: a message must never name a record that does not exist.
        Return how long the send took (the next claim learns the save cost from it).

        A delay past one delayed message's reach (a retry's long backoff), with a scheduler
        (``long_waits``), is a schedule's: the record says until when (``wake_at``) and which
        schedule; its fire is a timer, which hops once to end the delay on the second.

        Raises:
            PayloadTooLargeError: the record cannot be saved (nothing was written).
        """
        record = self.record
        record.status = Status.SUSPENDED
        record.generation += 1
        record.lease = None
        record.suspend_reason = reason
        record.counters.continuations += 1
        end_recovery(record)
        record.suspended_by = message_id
        reach_s = long_waits.reach_s if long_waits is not None else None
        if reach_s is not None and delay_s > reach_s:
            now = now_s()
            record.wake_at = epoch_to_datetime(now + delay_s)
            plan(record, now=now, reach_s=reach_s)
        self.close(RunOutcome.SUSPENDED, reason, then_sends=1)
        self._write(handing_over=True)
        started = time.monotonic()
        if long_waits is None or not long_waits.hand_over(record, kind="timer"):
            continuations.send(
                record.task_id,
                generation=record.generation,
                reason=reason,
                delay_s=round(delay_s),
            )
        return time.monotonic() - started

    def finish(self, status: Status, *, error: ErrorInfo | None = None) -> None:
        """Finish: write the record succeeded, failed or cancelled (then its objects are
        swept: tagged for expiry, or deleted). A value too large to save fails the task,
        naming it, with a readable record. A sweep that did not complete is kept in
        ``unswept`` for the worker to raise once the invocation has ended."""
        record = self.record
        record.status = status
        record.error = error
        record.lease = None
        record.suspend_reason = None  # it no longer waits: the status says how it ended
        end_recovery(record)
        record.finished_at = utcnow()
        if status != Status.SUCCEEDED:
            record.result = None
        self.close(RunOutcome(status.value), error.message if error else None)
        try:
            self._write(finished=True)
        except PayloadTooLargeError as exc:
            # Keep the record readable: drop the oversized parts and say what they were.
            record.status, record.result, record.journal = Status.FAILED, None, []
            if "the state" in exc.message:
                record.state = None
            record.error = error_info(exc, record)
            self.close(RunOutcome.FAILED, record.error.message)
            self._write(finished=True)

    def close(
        self,
        outcome: RunOutcome,
        reason: str | None,
        *,
        waiting_for: list[Waiter] | None = None,
        then_sends: int = 0,
        then_lists: int = 0,
    ) -> None:
        """Complete this invocation's history entry and add its cost to the task's, just
        before the write that ends the invocation (counted here, with the calls that follow
        it: ``then_sends`` messages, ``then_lists`` inbox listings)."""
        run, record = self.run, self.record
        if run is None:
            return
        if run.outcome != RunOutcome.RUNNING:  # closed before, and that write did not happen
            run.outcome, run.reason = outcome, reason
            run.waiting_for = list(waiting_for or [])
            return
        spent = dataclasses.replace(self.usage)
        spent.s3_put += 1
        spent.sqs_send += then_sends
        spent.s3_list += then_lists
        run.usage = spent
        run.steps_executed = record.counters.steps_executed - self._counted_from[0]
        run.steps_replayed = record.counters.steps_replayed - self._counted_from[1]
        end_run(
            run,
            outcome,
            reason=reason,
            turn=record.turn,
            elapsed_s=self.clock.elapsed_s(),
            memory_mb=self.memory_mb,
            waiting_for=waiting_for,
        )
        record.usage.add(spent)

    # -- the write ---------------------------------------------------------------------------

    def _write(
        self, *, finished: bool = False, own_lease: bool = True, handing_over: bool = False
    ) -> None:
        """Compare-and-swap the record, knowing an earlier write of ours may have landed.

        ``handing_over``: the write that parks the task (wait, suspend). The record is then
        the stored version its revision names (a warm worker may go on from it), so nothing is
        counted into it after the write; the next reader of the store would not see it either.
        """
        started = time.monotonic()
        records, record = self.records, self.record
        lease_until = self.lease.expires_at if own_lease else None
        try:
            try:
                self.revision = records.swap(
                    record, revision=self.revision, finished=finished, lease_until=lease_until
                )
            except RecordConflictError:
                if not own_lease:
                    raise
                stored, stored_revision = records.load(record.task_id)
                if stored.lease != self.lease:
                    raise
                self.revision = records.swap(
                    record, revision=stored_revision, finished=finished, lease_until=lease_until
                )
        except SweepIncompleteError as exc:  # the finish landed; the worker raises it later
            self.revision, self.unswept = exc.revision or self.revision, exc
        if self.saved is not None:
            self.saved()
        if handing_over:
            return
        observe(record.save_stats, time.monotonic() - started)
        record.counters.saves += 1
        record.counters.bytes_saved += records.last_record_bytes


def error_info(exc: ContinuumError, record: TaskRecord) -> ErrorInfo:
    """The record's form of an error (type, message, step, turn)."""
    return ErrorInfo(type=type(exc).__name__, message=exc.message, step=exc.step, turn=record.turn)
