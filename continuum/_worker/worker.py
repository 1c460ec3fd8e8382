"""One continuation in: parse, fence, claim, run turns, then suspend, wait or finish.

The protocol (DESIGN.md, "The continuation message"):

1. Read the record (or, in a warm worker, remember the one it just parked) and fence the
   message against it (``fence.py``): stale, duplicate, finished and forged messages are
   acknowledged without running anything (a finished task whose record is not tagged swept
   is swept first: ``sweeping.py``). A message for a waiting task is judged against its
   inbox (``waiting.py``): answered or due, it runs; an early timer hops; else it is ignored.
2. Claim: compare-and-swap the record to ``running`` with a lease until this invocation's
   deadline (``claim.py``). Losing the swap means another worker has it: acknowledge.
3. Run turns (``turns.py``), saving the journal by policy.
4. End (``endings.py``): suspend (write the record with generation + 1, then send the
   continuation), wait (write ``waiting``, look at the inbox, send a wake or the timer), or
   finish (write ``succeeded``, ``failed`` or ``cancelled``, then sweep); then acknowledge. A
   sweep cut short raises instead, so that the message comes back to finish it.

A worker that dies anywhere leaves its message in flight; it reappears after its visibility
timeout, which the claim shortened to just past this invocation's deadline.
"""

from __future__ import annotations

import threading
from typing import Any

from continuum._base.clock import now_s, real_monotonic, utcnow
from continuum._define.observers import MessageHandled, Observers
from continuum._define.settings import Settings
from continuum._fanout.child_tasks import ChildClient, ChildTasks, cancel_children, report_to_parent
from continuum._record.continuation import Continuation, Continuations
from continuum._record.history import RunClock
from continuum._record.model import Status, TaskRecord
from continuum._record.records import Records
from continuum._turn.tasks import Registry, Task
from continuum._worker.claim import Claim, error_info
from continuum._worker.endings import Endings, Outcome, after_sweep, too_new_for
from continuum._worker.fence import Verdict, fence
from continuum._worker.invocation import Invocation
from continuum._worker.metering import Meter
from continuum._worker.sqs_batch import (
    Delivery,
    LambdaContext,
    OutcomeMetrics,
    clear_log_keys,
    log_keys,
    logger,
    memory_mb,
    process_sqs_batch,
    remaining_s,
    shorten_visibility,
)
from continuum._worker.wake import Decision, decide, listing_for, undecided
from continuum._worker.warm_cache import RecentRecords
from continuum.errors import (
    BadMessageError,
    InvalidTaskIdError,
    LeaseHeldError,
    RecordConflictError,
    RecordCorruptError,
    RecordNotFoundError,
    RecordTooNewError,
    UnknownTaskError,
)

__all__ = ["Outcome", "Worker"]


#: How often a wake is judged again when its claim loses the record to another write.
WAKE_RETRIES = 3


def _client(
    records: Records, continuations: Continuations, registry: Registry, settings: Settings
) -> ChildClient:
    # Imported when a task first starts or cancels a child, thread safely (an import holds
    # its module's lock until it is done): other messages never need it (~1 ms of import).
    from continuum._ops.client import Client

    return Client(records, continuations, registry=registry, settings=settings)


class _StaleMemory(Exception):
    """The record this worker remembered has been changed by someone else."""


class Worker:
    """Processes continuation messages.

    Args:
        registry: the app's tasks.
        records: where the records are.
        continuations: where continuations are sent (and how they are signed).
        settings: the budget policy, limits and margins.
    """

    def __init__(
        self,
        registry: Registry,
        records: Records,
        continuations: Continuations,
        settings: Settings,
        *,
        meter: Meter | None = None,
        observers: Observers | None = None,
    ) -> None:
        self.registry = registry
        self.records = records
        self.continuations = continuations
        self.settings = settings
        self.recent = RecentRecords()
        #: what happens is told to the Powertools metrics, then to the app's observers.
        self.observers = Observers(then=observers)
        self.observers.add(OutcomeMetrics())
        #: starts child tasks for the turns (``ctx.invoke``, ``ctx.map_tasks``).
        self.children = ChildTasks(lambda: _client(records, continuations, registry, settings))
        self.endings = Endings(
            records, continuations, settings, self.recent, self.observers, self.children
        )
        self._local = threading.local()
        #: counts this worker's store and queue calls per message (the app wraps both in it).
        self.meter = meter or Meter()

    def handle_batch(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """Process an SQS batch; failed messages are reported, never fail their neighbours."""

        def handle(delivery: Delivery) -> str:
            started = real_monotonic()  # what Lambda bills: a virtual clock's jumps do not count
            outcome = self.process(delivery, context)
            self.observers.emit(
                "message_handled",
                MessageHandled(
                    outcome=outcome.value,
                    task_name=getattr(self._local, "task", None),
                    duration_ms=(real_monotonic() - started) * 1e3,
                    task_id=getattr(self._local, "task_id", None),
                ),
            )
            return outcome.value

        try:
            return process_sqs_batch(event, context, handle)
        finally:
            self.observers.emit("batch_done", None)

    def process(self, delivery: Delivery, context: LambdaContext) -> Outcome:
        """Process one message; return what happened. Raise only to have it retried."""
        clear_log_keys()
        self._local.task = self._local.task_id = None
        self._local.usage = self.meter.start()
        self._local.clock = RunClock()
        try:
            message = self.continuations.parse(delivery.body)
        except (BadMessageError, InvalidTaskIdError) as exc:
            # Retrying cannot fix a malformed message: acknowledge and say why.
            logger.error(f"rejected a message: {exc}", extra={"message_id": delivery.message_id})
            return Outcome.REJECTED
        self._local.task_id = message.task_id
        log_keys(
            correlation_id=message.task_id, task_id=message.task_id, generation=message.generation
        )
        # A wake that lost its claim to a timer hop must look again: the hop wrote a new
        # generation without looking at the inbox, trusting wakes to make workers look.
        tries = WAKE_RETRIES if message.kind == "wake" else 1
        for attempt in range(tries):
            try:
                return self._process(message, delivery, context)
            except RecordConflictError:
                if attempt + 1 == tries:
                    break
                logger.info("the record moved under this wake; looking again")
        logger.info("another worker moved the record; stopping")
        return Outcome.FENCED

    def _process(
        self, message: Continuation, delivery: Delivery, context: LambdaContext
    ) -> Outcome:
        if (
            message.kind == "wake"
            and message.batch is not None
            and (not message.batch.decides or undecided(self.records.inbox, message))
        ):
            return Outcome.IGNORED  # a child reported; its batch cannot decide yet
        mine = self.recent.take(message)
        if mine is not None:
            try:
                return self._run(message, delivery, context, *mine, from_memory=True)
            except _StaleMemory:
                logger.info("the record moved since this worker last wrote it; reading it")
        try:
            record, etag = self.records.load(message.task_id)
        except RecordNotFoundError as exc:
            logger.error(f"no record for this continuation: {exc}")
            return Outcome.REJECTED
        except RecordTooNewError as exc:
            return self.endings.leave_for_newer(message, exc)
        except RecordCorruptError as exc:
            # Retrying cannot repair it; a person restores a good version (bucket versioning
            # keeps them all) and resumes the task.
            logger.error(f"the record does not parse: {exc}")
            return Outcome.REJECTED
        return self._run(message, delivery, context, record, etag, from_memory=False)

    def _leave_if_newer(
        self, message: Continuation, record: TaskRecord, from_memory: bool
    ) -> Outcome | None:
        """A record of a newer version of its task is left untouched (no claim, no hop) for
        the newer code, and its message sent again; None: not newer."""
        too_new = too_new_for(self.registry.tasks.get(record.task_name), record)
        if too_new is None:
            return None
        if from_memory:
            raise _StaleMemory  # leaving it writes nothing: only the store may decide that
        return self.endings.leave_for_newer(message, too_new)

    def _run(
        self,
        message: Continuation,
        delivery: Delivery,
        context: LambdaContext,
        record: TaskRecord,
        etag: str,
        *,
        from_memory: bool,
    ) -> Outcome:
        # 1. The fence (and, for a waiting task, its inbox).
        verdict = fence(record, message, message_id=delivery.message_id, now=utcnow())
        if from_memory and verdict is not Verdict.RUN:
            raise _StaleMemory  # only a claim or a hop (conditional writes) trusts memory
        self._local.task = record.task_name
        match verdict:
            case Verdict.RUN | Verdict.CHECK_INBOX:
                pass
            case Verdict.RETRY_LATER:
                raise LeaseHeldError(
                    "a live worker is processing this message; retry after its lease",
                    task_id=record.task_id,
                    generation=record.generation,
                )
            case Verdict.RESEND:
                # The worker that suspended the task (or made it wait) may have died before
                # sending; send again (a duplicate is fenced like any other).
                self.endings.resend(record)
                return Outcome.RESENT
            case Verdict.FINISHED:
                # Its worker may have died after the finish write: a child reports again
                # (idempotent), a sweep cut short is finished (else retried), and a
                # cancelled parent cancels its children again.
                cancel_children(self.children, record)
                report_to_parent(self.records, self.continuations, record, again=True)
                swept = self.records.sweeper.ensure_swept(record)
                return Outcome.SWEPT if swept else Outcome.FINISHED
            case Verdict.FUTURE:
                logger.error(
                    "message names a generation the record has not reached",
                    extra={"record_generation": record.generation},
                )
                return Outcome.REJECTED
            case _:
                return Outcome(verdict.value)
        now = now_s()
        poll_s = self.settings.inbox_poll_s
        listing = listing_for(self.records.inbox, record, message, poll_s, now=now)
        if record.status == Status.WAITING:
            assert listing is not None
            timer = verdict is Verdict.RUN and message.kind == "timer"
            match decide(record, listing, timer=timer, now=now):
                case Decision.IGNORE if from_memory:
                    raise _StaleMemory
                case Decision.IGNORE:
                    return Outcome.IGNORED
                case Decision.HOP:
                    if (left := self._leave_if_newer(message, record, from_memory)) is not None:
                        return left  # a newer version's wait: its hops are the newer code's
                    try:
                        return self.endings.hop(
                            record,
                            etag,
                            message_id=delivery.message_id,
                            spent=self._local.usage,
                            elapsed_s=self._local.clock.elapsed_s(),
                            memory_mb=memory_mb(context),
                        )
                    except RecordConflictError as exc:  # from memory: read the record
                        raise (_StaleMemory() if from_memory else exc) from None

        # 2. The claim.
        left_s = remaining_s(context)
        try:
            task: Task[Any] | None = self.registry.task(record.task_name, task_id=record.task_id)
        except UnknownTaskError as exc:
            task, unknown = None, exc
        if (left := self._leave_if_newer(message, record, from_memory)) is not None:
            return left
        record.max_value_bytes = self.settings.max_state_bytes  # for clients to check sends
        try:
            claim = Claim.take(
                self.records,
                record,
                etag,
                owner=str(getattr(context, "aws_request_id", None) or "local"),
                message_id=delivery.message_id,
                remaining_s=left_s,
                send_s=self.recent.last_send_s(record.task_id),
                message_kind=message.kind if message.reason != "start" else "start",
            )
        except RecordConflictError:
            if from_memory:
                raise _StaleMemory from None
            raise
        claim.usage, claim.clock = self._local.usage, self._local.clock
        claim.memory_mb = memory_mb(context)
        invocation = Invocation(
            claim,
            task,
            context,
            records=self.records,
            settings=self.settings,
            endings=self.endings,
            observers=self.observers,
            children=self.children,
        )
        if task is None:
            return after_sweep(claim, invocation.fail(error_info(unknown, record)))
        shorten_visibility(
            self.continuations.queue, delivery, left_s, self.settings.visibility_margin_s
        )
        # 3. The turns, and 4. the ending.
        return after_sweep(claim, invocation.run(message, delivery.message_id, listing))
