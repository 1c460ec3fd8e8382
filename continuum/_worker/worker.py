"""One continuation in: parse, admit, run turns, then suspend, wait or finish.

The protocol of a continuation message. Steps 1 to 3 are the admission (``admission.py``): an
ordered list of rules, each letting the message on or stopping it with an outcome, and each
that let it on released once its handling ends, however it ends.

1. Fence (``Fence``): the record (read, or in a warm worker the one it just parked:
   ``warm_cache.py``) fences the message (``fence.py``): stale, duplicate, finished and
   forged messages are acknowledged without running anything (a finished task whose record
   is not tagged swept is swept first: ``_record/sweep.py``).
2. Wake (``Wake``, ``EarlyBackoff``): a message for a waiting task is judged against its inbox
   (``wake.py``): answered or due, it runs; an early timer hops (so does a retry's long
   backoff whose schedule fired early); else it is ignored. A record a newer version of its
   task wrote is left untouched for the newer code (``LeaveIfNewer``).
3. Claim (``ClaimRecord``): compare-and-swap the record to ``running`` with a lease until this
   invocation's deadline (``claim.py``). Losing the swap means another worker has it.
4. Run turns (``_invoke``, ``invocation.py``), saving the journal by policy.
5. End (``endings.py``): suspend (write the record with generation + 1, then send the
   continuation), wait (write ``waiting``, look at the inbox, send a wake or the timer), or
   finish (write ``succeeded``, ``failed`` or ``cancelled``, then sweep); then acknowledge. A
   sweep cut short raises instead, so that the message comes back to finish it.

A worker that dies anywhere leaves its message in flight; it reappears after its visibility
timeout, which the claim shortened to just past this invocation's deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from continuum._base.clock import now_s, real_monotonic
from continuum._define.observers import MessageHandled, Observers
from continuum._define.settings import Settings
from continuum._fanout.child_tasks import ChildClient, ChildTasks
from continuum._record.continuation import Continuation, Continuations, is_schedule_fire
from continuum._record.history import RunClock
from continuum._record.model import Status, TaskRecord
from continuum._record.persistence import Records
from continuum._turn.loop_slot import invocation_loop
from continuum._turn.tasks import Registry, Task
from continuum._worker.admission import Admission, AdmissionRules, StaleMemory, builtin_rules
from continuum._worker.claim import error_info
from continuum._worker.endings import Endings, Outcome, after_sweep
from continuum._worker.invocation import Invocation
from continuum._worker.long_waits import LongWaits
from continuum._worker.metering import Meter
from continuum._worker.sqs_batch import (
    Delivery,
    LambdaContext,
    OutcomeMetrics,
    clear_log_keys,
    log_keys,
    logger,
    process_sqs_batch,
    shorten_visibility,
)
from continuum._worker.wake import undecided
from continuum._worker.warm_cache import RecentRecords
from continuum.errors import (
    BadMessageError,
    InvalidTaskIdError,
    RecordConflictError,
    RecordCorruptError,
    RecordNotFoundError,
    RecordTooNewError,
    UnknownTaskError,
)

__all__ = ["Outcome", "Worker"]

if TYPE_CHECKING:
    from continuum.backends.scheduler import ContinuationScheduler


#: How often a wake is judged again when its claim loses the record to another write.
WAKE_RETRIES = 3


class Worker:
    """Processes continuation messages.

    Args:
        registry: the app's tasks.
        records: where the records are.
        continuations: where continuations are sent (and how they are signed).
        settings: the budget policy, limits and margins.
        child_client: makes the client that starts and cancels child tasks (``ctx.invoke``,
            ``ctx.map_tasks``), on a task's first such call: the app's ``client``.
        meter: counts the store and queue calls of each message.
        observers: the app's observers of what the worker does.
        scheduler: the continuation scheduler (``app.scheduler()``): a deadline past one
            delayed message is handed to one of its schedules; None: such waits hop.
    """

    def __init__(
        self,
        registry: Registry,
        records: Records,
        continuations: Continuations,
        settings: Settings,
        *,
        child_client: Callable[[], ChildClient],
        meter: Meter | None = None,
        observers: Observers | None = None,
        scheduler: ContinuationScheduler | None = None,
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
        self.children = ChildTasks(child_client)
        self.long_waits = LongWaits(scheduler, continuations)
        self.endings = Endings(
            records,
            continuations,
            settings,
            self.recent,
            self.observers,
            self.children,
            long_waits=self.long_waits,
        )
        self._local = threading.local()
        #: the checks before a task's turns run, in order (``admission.py``).
        self.admission = AdmissionRules(
            builtin_rules(
                registry,
                records,
                settings,
                self.endings,
                self.recent,
                self.long_waits,
                named=self._named,
            )
        )
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
            with invocation_loop():  # one event loop for the async turns of this invocation
                return process_sqs_batch(event, context, handle)
        finally:
            self.observers.emit("batch_done", None)

    def process(self, delivery: Delivery, context: LambdaContext) -> Outcome:
        """Process one message; return what happened. Raise only to have it retried."""
        clear_log_keys()
        self._local.task = self._local.task_id = None
        self._local.usage = self.meter.start()
        self._local.clock = RunClock()
        if is_schedule_fire(delivery.body):  # a recurring schedule's fire: it starts a run
            from continuum._worker.schedule_fires import ScheduleFires

            fires = ScheduleFires(self.registry, self.records, self.continuations, self.settings)
            return fires.handle(delivery)
        try:
            message = self.continuations.parse(delivery.body)
        except (BadMessageError, InvalidTaskIdError) as exc:
            # Retrying cannot fix a malformed message: acknowledge and say why.
            logger.error(f"rejected a message: {exc}", extra={"message_id": delivery.message_id})
            if isinstance(exc, BadMessageError) and exc.task_id is not None:
                self._note_refused_start(exc.task_id, exc)
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

    def _note_refused_start(self, task_id: str, exc: BadMessageError) -> None:
        """Leave why beside the record of a task that never ran (a start signed with another
        key, or not signed), once, so that its status says so. A running or finished task,
        and a child (its parent starts it, signed), are left alone, whoever sent the message."""
        try:
            record, _ = self.records.load(task_id)
            never_ran = record.status == Status.PENDING and not record.counters.invocations
            if never_ran and record.parent is None:
                self.records.inbox.put_start_refusal(task_id, str(exc.args[0]))
        except RecordNotFoundError:
            return  # no such task: nothing to note, and nothing is written for it
        except Exception as error:  # a note for the operator: the message is refused anyway
            logger.warning(f"could not note the refused start of task {task_id}: {error}")

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
            except StaleMemory:
                logger.info("the record moved since this worker last wrote it; reading it")
        try:
            record, revision = self.records.load(message.task_id)
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
        return self._run(message, delivery, context, record, revision, from_memory=False)

    def _run(
        self,
        message: Continuation,
        delivery: Delivery,
        context: LambdaContext,
        record: TaskRecord,
        revision: str,
        *,
        from_memory: bool,
    ) -> Outcome:
        """Steps 1 to 3, the admission's rules, then 4 and 5, the turns and their ending."""
        usage, clock = self._local.usage, self._local.clock
        admission = Admission(
            message, delivery, context, from_memory, record, revision, usage, clock, now=now_s()
        )
        return self.admission.admit(admission, then=self._invoke)

    def _named(self, task_name: str) -> None:
        self._local.task = task_name

    def _invoke(self, admission: Admission) -> Outcome:
        """Run the claimed task's turns and end the hold (a task this app lacks fails)."""
        claim = admission.claim
        assert claim is not None
        record = claim.record
        try:
            task: Task[Any] | None = self.registry.task(record.task_name, task_id=record.task_id)
        except UnknownTaskError as exc:
            task, unknown = None, exc
        invocation = Invocation(
            claim,
            task,
            admission.context,
            records=self.records,
            settings=self.settings,
            endings=self.endings,
            observers=self.observers,
            children=self.children,
        )
        if task is None:
            return after_sweep(claim, invocation.fail(error_info(unknown, record)))
        queue, margin_s = self.continuations.queue, self.settings.visibility_margin_s
        shorten_visibility(queue, admission.delivery, admission.left_s, margin_s)
        ended = invocation.run(admission.message, admission.message_id, admission.listing)
        return after_sweep(claim, ended)
