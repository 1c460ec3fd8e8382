"""The local runtime: emulated Lambda invocations over moto's S3 and SQS, or the in-memory fakes.

It points the app at a bucket and continuation queue (created on moto, or the in-memory pair),
and then plays the part of Lambda's SQS event source: it receives messages, calls
``app.handler`` with an SQS batch event and a Lambda context whose deadline is the chosen
budget, and deletes the messages the handler did not report as failed. Delays and visibility
timeouts apply, so continuations, retries and redeliveries really happen.

With ``scheduler=True`` the app also gets a continuation scheduler (the in-memory one, or
EventBridge Scheduler on moto's ``scheduler``, in a group made first), and the runtime plays
EventBridge Scheduler's part too: moto stores schedules and never fires them, so a
``ScheduleFirer`` fires every due schedule (one-time or recurring) into the queue, on the
runtime's clock; the virtual clock jumps to the next fire as to the next message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from continuum._app.app import Continuum
from continuum._base.clock import now_s, real_monotonic
from continuum._local.lambda_emulation import ACCOUNT, REGION, LocalLambdaContext, event_record
from continuum._local.reports import (
    InvocationReport,
    RunSummary,
    fire_of,
    handled_on,
    invocation_of,
    kept_status,
    summary_of,
    waits_for_outside,
)
from continuum._local.virtual_time import DueTimes, RealTime, VirtualTime
from continuum._record.blob_records import BlobRecords, on_blobs
from continuum._record.model import Counters, TaskRecord
from continuum._worker.metering import CallCounter, Uncounted
from continuum.backends.queue import MAX_DELAY_S, ContinuationQueue
from continuum.backends.scheduler import ContinuationScheduler, Schedule, ScheduleState
from continuum.backends.store import RecordStore
from continuum.errors import ContinuumError, RecordNotFoundError

if TYPE_CHECKING:
    from continuum.backends.memory.scheduler import ScheduleFirer

__all__ = [
    "BUCKET",
    "QUEUE",
    "REGION",
    "InvocationReport",
    "LocalLambdaContext",
    "LocalRuntime",
    "RunSummary",
    "event_record",
    "moto_backend",
    "sync_local_schedules",
    "waits_for_outside",
]

BUCKET = "continuum-local"
QUEUE = "continuum-local"
#: The local schedule group, and the role its schedules would send with on AWS.
SCHEDULE_GROUP = "continuum-local"
SCHEDULER_ROLE = "continuum-local-scheduler"
#: How long the emulated event source waits before polling an empty queue again.
POLL_INTERVAL_S = 0.02

Backend = Literal["moto", "memory"]


@dataclass(slots=True)
class _Driven:
    """What :meth:`LocalRuntime.drive` knows of its task between invocations.

    Attributes:
        before: the record as last read.
        overruns: the invocations that ran past their budget.
        stale: ``before`` lags only in generation and counters (a hop, an ignored wake).
    """

    task_id: str
    before: TaskRecord
    overruns: int = 0
    stale: bool = False


def sync_local_schedules(app: Continuum, *, memory: bool) -> None:
    """Sync the app's declared schedules into its scheduler, where a local firer fires them.

    Only a local one: on the memory backend an in-memory scheduler (never one the environment
    names); elsewhere the one the app has, which moto or ``continuum dev``'s endpoint serves.
    """
    if not app.registry.schedules:
        return
    scheduler = app.scheduler()
    if scheduler is None:
        return
    from continuum._ops.schedule_sync import sync_schedules
    from continuum.backends.memory.scheduler import InMemoryScheduler

    if memory and not isinstance(scheduler, InMemoryScheduler):
        return
    from continuum.backends.scheduler import SchedulerError

    try:
        sync_schedules(app, scheduler)
    except SchedulerError as exc:  # a local run goes on without them, and says so
        logging.getLogger("continuum.local").warning(f"the app's schedules were not synced: {exc}")


@contextlib.contextmanager
def moto_backend() -> Iterator[None]:
    """Run the block with moto's in-process S3 and SQS, and fake credentials."""
    from moto import mock_aws

    with mock_aws():
        yield


class LocalRuntime:
    """Runs an app's tasks end to end, invocation by invocation.

    Args:
        app: the app whose tasks to run; it is pointed at the runtime's bucket and queue.
        budget_s: the deadline of each emulated invocation, in seconds.
        batch_size: messages per emulated SQS batch.
        backend: "moto" (use inside :func:`moto_backend`, or with ``endpoint_url``) or
            "memory" (the in-memory fakes, ``continuum.backends.memory``).
        endpoint_url: an S3/SQS endpoint (a moto server); None for in-process moto.
        visibility_timeout_s: the queue's visibility timeout (default: six budgets).
        virtual_time: run on a virtual clock that jumps to the next due message whenever
            nothing can run (freezegun); False: the real clock.
        max_delay_s: the longest delay of the in-memory queue (SQS's 900 s by default).
        scheduler: give the app a continuation scheduler and fire its schedules (long waits
            then cost one schedule, not a chain of hops); False: no scheduler.
        clock: the virtual clock to run on (default: a new one from now, with
            ``virtual_time``); the app's schedules are made at its time.
    """

    def __init__(
        self,
        app: Continuum,
        *,
        budget_s: float,
        batch_size: int = 1,
        backend: Backend = "moto",
        endpoint_url: str | None = None,
        visibility_timeout_s: int | None = None,
        virtual_time: bool = False,
        max_delay_s: int = MAX_DELAY_S,
        scheduler: bool = False,
        clock: VirtualTime | None = None,
    ) -> None:
        self.app = app
        self.time: RealTime | VirtualTime = clock or (VirtualTime() if virtual_time else RealTime())
        self.max_delay_s = max_delay_s
        self.budget_s = budget_s
        self.batch_size = batch_size
        self.backend = backend
        self.counter = CallCounter()
        self._quiet = threading.local()
        self.visibility_timeout_s = visibility_timeout_s or max(6, int(budget_s * 6))
        self.queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}"
        #: fires the app's due schedules (None: the app has no scheduler of the runtime's).
        self.firer: ScheduleFirer | None = None
        self._next_fire: _NextFire | None = None
        #: False while ``recurring_held``: the app's recurring schedules do not fire.
        self.fires_recurring = True
        if backend == "memory":
            self._setup_memory()
        else:
            self._setup_moto(endpoint_url)
        if scheduler:
            with self.time.running():  # the firer starts at the clock's time, not the real now
                self._setup_scheduler(endpoint_url)
        # the runtime put the app's records on its own store above, so they are on blobs
        prefix = on_blobs(app.records, needs="the local runtime").prefix
        self.observer = BlobRecords(self.observer_store, prefix=prefix)
        self.handled = handled_on(app)
        self._seen: dict[str, TaskRecord] = {}  # child tasks' records after their last run
        self.counter.calls.clear()
        self.invocations = 0
        # For the local firer to fire: into the runtime's own scheduler (the app holds it
        # wrapped), or on memory only into an in-memory scheduler the app was given.
        if app.registry.schedules:
            with self.time.running():  # made at the clock's time, they fire from there on
                sync_local_schedules(app, memory=backend == "memory" and self.firer is None)

    def _setup_memory(self) -> None:
        from continuum.backends.memory import InMemoryContinuationQueue, InMemoryRecordStore

        quiet = self._quiet
        store = InMemoryRecordStore(on_call=self.counter.hook("s3", quiet))
        queue = InMemoryContinuationQueue(
            visibility_timeout_s=self.visibility_timeout_s,
            on_call=self.counter.hook("sqs", quiet),
            max_delay_s=self.max_delay_s,
        )
        self.store, self.queue = store, queue
        self.app.configure(store=store, queue=queue)
        # The event source and the observer see the same objects without being counted.
        self.source: ContinuationQueue = Uncounted(queue, quiet)
        self.observer_store: RecordStore = Uncounted(store, quiet)
        self.queue_url = "memory://continuum-local"

    def _setup_moto(self, endpoint_url: str | None) -> None:
        import boto3

        from continuum.backends.s3 import S3RecordStore
        from continuum.backends.sqs import SQSContinuationQueue

        options: dict[str, Any] = {
            "region_name": REGION,
            "endpoint_url": endpoint_url,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.s3 = boto3.client("s3", **options)
        self.sqs = boto3.client("sqs", **options)
        self.counter.attach(self.s3)
        self.counter.attach(self.sqs)
        self.s3.create_bucket(Bucket=BUCKET)
        self.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        self.queue_url = self.sqs.create_queue(
            QueueName=QUEUE, Attributes={"VisibilityTimeout": str(self.visibility_timeout_s)}
        )["QueueUrl"]
        # The app's queue remembers when what it sends becomes visible (for the virtual clock).
        self.due = DueTimes(SQSContinuationQueue(self.sqs, self.queue_url))
        self.app.configure(store=S3RecordStore(self.s3, BUCKET), queue=self.due)
        # The event source and the observer use their own clients, so that the counter
        # sees only the calls the framework makes.
        self.source = SQSContinuationQueue(boto3.client("sqs", **options), self.queue_url)
        self.observer_store = S3RecordStore(boto3.client("s3", **options), BUCKET)

    def _setup_scheduler(self, endpoint_url: str | None) -> None:
        from continuum.backends.memory.scheduler import InMemoryScheduler, ScheduleFirer

        app_scheduler: ContinuationScheduler
        fired: Any  # the firer's own view: its calls are the runtime's, not counted
        if self.backend == "memory":
            scheduler = InMemoryScheduler(
                clock=now_s, on_call=self.counter.hook("scheduler", self._quiet)
            )
            app_scheduler, fired = scheduler, Uncounted(scheduler, self._quiet)
        else:
            import boto3

            from continuum.backends.eventbridge import EventBridgeScheduler

            options: dict[str, Any] = {
                "region_name": REGION,
                "endpoint_url": endpoint_url,
                "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing",
            }
            client = boto3.client("scheduler", **options)
            self.counter.attach(client)
            with contextlib.suppress(client.exceptions.ConflictException):  # a server's, kept
                client.create_schedule_group(Name=SCHEDULE_GROUP)
            role_arn = f"arn:aws:iam::{ACCOUNT}:role/{SCHEDULER_ROLE}"
            where = {"group": SCHEDULE_GROUP, "target_arn": self.queue_arn, "role_arn": role_arn}
            app_scheduler = EventBridgeScheduler(client, **where)
            fired = EventBridgeScheduler(boto3.client("scheduler", **options), **where)
        self._next_fire = _NextFire(app_scheduler)
        self.app.configure(scheduler=self._next_fire)
        self.firer = ScheduleFirer(fired, clock=now_s)
        self.counter.calls.clear()

    def fire_schedules(self) -> int:
        """Send what the app's schedules have due to the queue, as EventBridge Scheduler
        would; return how many fired (none without a scheduler)."""
        firer, noted = self.firer, self._next_fire
        if firer is None or noted is None:
            return 0
        due = noted.due_at(firer, recurring=self.fires_recurring)
        if due is None or due > now_s():
            return 0
        fired = firer.fire_due(self.source, recurring=self.fires_recurring)
        noted.changed()
        return len(fired)

    @contextlib.contextmanager
    def recurring_held(self) -> Iterator[None]:
        """Fire none of the app's recurring schedules meanwhile (one-time ones still fire):
        their times that pass meanwhile pass undelivered, as a paused schedule's."""
        self.fires_recurring = False
        try:
            yield
        finally:
            self.fires_recurring = True
            if self.firer is not None and self._next_fire is not None:
                with self.time.running():
                    self.firer.fire_due(self.source, recurring=False)
                self._next_fire.changed()

    def record(self, task_id: str) -> TaskRecord:
        """Read a task's record without counting the call."""
        return self.observer.load(task_id)[0]

    def _refuse_inside_an_event_loop(self) -> None:
        """An async task's turn runs its own event loop, which cannot run inside another in the
        same thread: say so before a message is taken, not by failing the task."""
        if asyncio._get_running_loop() is None:
            return
        names = sorted(name for name, task in self.app.tasks.items() if task.is_async)
        if names:
            raise ContinuumError(
                f"the app's async tasks ({', '.join(names)}) cannot run from inside a running "
                "event loop: the local runtime runs each invocation's turns on a loop of its own",
                hint="drive it from sync code; in an async test, "
                "`await asyncio.to_thread(runner.run, task, input)`",
            )

    def record_if_any(self, task_id: str) -> TaskRecord | None:
        """``record``, or None for a task that has none (a child not started yet)."""
        try:
            return self.record(task_id)
        except RecordNotFoundError:
            return None

    def invoke_once(self, context: Any = None) -> dict[str, Any] | None:
        """Receive one batch and run the handler on it, as Lambda would; None if none waits.

        ``context`` replaces the Lambda context (default: one with this runtime's budget).
        """
        self._refuse_inside_an_event_loop()
        self.fire_schedules()
        messages = self.source.receive(max_messages=self.batch_size)
        if not messages:
            return None
        if self.backend != "memory":  # unless deleted, they come back after the visibility
            self.due.note(now_s() + self.visibility_timeout_s)
        event = {"Records": [event_record(m, self.queue_arn) for m in messages]}
        self.invocations += 1
        result = self.app.handler(event, context or LocalLambdaContext(self.budget_s))
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        for message in messages:
            if message.message_id not in failed:
                self.source.delete(message.receipt_handle)
        return result

    def run(
        self,
        task_name: str,
        input: Any,
        *,
        task_id: str | None = None,
        on_invocation: Callable[[InvocationReport], None] | None = None,
        timeout_s: float = 600.0,
    ) -> RunSummary:
        """Start a task and run invocations until it finishes, or waits for the outside
        world with nothing else due; return the summary."""
        with self.time.running():
            task_id = self.app.client().start(task_name, input, task_id=task_id)
            return self.drive(task_id, on_invocation=on_invocation, timeout_s=timeout_s)

    def drive(
        self,
        task_id: str,
        *,
        on_invocation: Callable[[InvocationReport], None] | None = None,
        timeout_s: float = 600.0,
        stop_when_waiting: bool = True,
        context: Callable[[], Any] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> RunSummary:
        """Run invocations until the task finishes, or waits for the outside world.

        Args:
            task_id: the task.
            on_invocation: called after each invocation with what it did.
            timeout_s: give up after this long (wall time).
            stop_when_waiting: return as soon as the task waits for something other than
                time (a callback, a signal), before the virtual clock could jump to its
                timeout: answer it, then drive again. False: go on (deadlines fire).
            context: makes each invocation's Lambda context (default: this runtime's budget).
            should_stop: return before the next invocation once this says so (Ctrl-C).
        """
        started = real_monotonic()
        with self.time.running():
            run = _Driven(task_id, self.record(task_id))
            while not run.before.status.finished:
                if should_stop is not None and should_stop():
                    break
                if real_monotonic() - started > timeout_s:
                    raise ContinuumError(
                        f"the task did not finish within {timeout_s:.0f}s", task_id=task_id
                    )
                t0 = real_monotonic()
                self.handled.take()
                result = self.invoke_once(context() if context is not None else None)
                if result is None:
                    if not self._wait_for_next(run.before, stop_when_waiting):
                        break  # nothing will ever arrive unless the outside world sends it
                    continue
                self._look_after(run, result, real_monotonic() - t0, on_invocation)
            if run.stale:
                run.before = self.record(task_id)
            return self.summary(
                run.before, overruns=run.overruns, seconds=real_monotonic() - started
            )

    def _wait_for_next(self, record: TaskRecord, stop_when_waiting: bool) -> bool:
        """Wait until the next message is due; False if none is, or none will be until the
        outside world answers what the task waits for (and ``stop_when_waiting``)."""
        due = self.next_due()
        if due is None or (stop_when_waiting and waits_for_outside(record, self.record_if_any)):
            return False
        self.time.wait_until(due, poll_s=POLL_INTERVAL_S)
        return True

    def _look_after(
        self,
        run: _Driven,
        result: dict[str, Any],
        seconds: float,
        on_invocation: Callable[[InvocationReport], None] | None,
    ) -> None:
        """Note what an invocation did: its overrun, the record it left, its report."""
        overran = seconds > self.budget_s
        run.overruns += int(overran)
        handled = self.handled.take()
        if on_invocation is None and not result.get("batchItemFailures"):
            # A hop or an ignored wake changes nothing the loop decides on.
            run.stale = kept_status(handled, run.task_id)
            if run.stale:
                return
        after = self.record(run.task_id)
        if on_invocation is not None:
            on_invocation(
                fire_of(self.invocations, handled, seconds, overran)
                or self._other(handled, run.task_id, seconds, overran)
                or invocation_of(self.invocations, run.before, after, seconds, overran)
            )
        run.before, run.stale = after, False

    def _other(
        self, handled: list[tuple[str | None, str]], task_id: str, seconds: float, overran: bool
    ) -> InvocationReport | None:
        """The last invocation as a child task's, if it ran one and not ``task_id``."""
        ran = [t for t, _ in handled if t]
        if not ran or task_id in ran:
            return None
        try:
            after = self.record(ran[0])
        except ContinuumError:
            return None
        first = after.model_copy(update={"counters": Counters(), "turn": 0})
        inv = invocation_of(
            self.invocations, self._seen.get(ran[0], first), after, seconds, overran
        )
        self._seen[ran[0]] = after
        inv.task_id, inv.task_name = ran[0], after.task_name
        inv.index = after.parent.index if after.parent is not None else None
        if after.parent is None:  # not a child: a schedule's run, named {schedule}-{time}
            names = [n for n in self.app.registry.schedules if ran[0].startswith(f"{n}-")]
            inv.schedule = max(names, key=len, default=None)
        return inv

    def next_due(self) -> float | None:
        """When the next message becomes visible, or the next schedule fires (epoch s); None
        if none is in the queue and no schedule will fire."""
        if self.backend == "memory":
            message = self.queue.next_visible_at()
        else:
            message = self.due.next_due(now_s())
        fire = None
        if self.firer is not None and self._next_fire is not None:
            fire = self._next_fire.due_at(self.firer, recurring=self.fires_recurring)
        times = [t for t in (message, fire) if t is not None]
        return min(times) if times else None

    def summary(self, record: TaskRecord, *, overruns: int = 0, seconds: float = 0.0) -> RunSummary:
        """A run's summary from the task's record and the calls counted so far."""
        return summary_of(
            record,
            self.counter,
            overruns=overruns,
            seconds=seconds,
            all_invocations=self.invocations,
        )


class _NextFire:
    """The app's scheduler, noting when it changes, so that the runtime asks the firer when
    the next fire is only after a change or a fire (on moto that lists the group and reads
    each schedule)."""

    def __init__(self, scheduler: ContinuationScheduler) -> None:
        self.scheduler = scheduler
        self._due: dict[bool, float | None] = {}  # by whether recurring schedules count
        self._lock = threading.Lock()

    def changed(self) -> None:
        with self._lock:
            self._due.clear()

    def due_at(self, firer: ScheduleFirer, *, recurring: bool = True) -> float | None:
        """When the next schedule fires (epoch s), None: none will; ``recurring=False``: the
        next one-time schedule."""
        with self._lock:
            if recurring not in self._due:
                at = firer.next_due_at(recurring=recurring)
                self._due[recurring] = None if at is None else at.timestamp()
            return self._due[recurring]

    def schedule_at(self, *, name: str, at: Any, message_body: str) -> None:
        self.changed()
        self.scheduler.schedule_at(name=name, at=at, message_body=message_body)

    def put_recurring(
        self,
        *,
        name: str,
        expression: str,
        message_body: str,
        timezone: str = "UTC",
        state: ScheduleState | None = None,
    ) -> None:
        self.changed()
        self.scheduler.put_recurring(
            name=name,
            expression=expression,
            message_body=message_body,
            timezone=timezone,
            state=state,
        )

    def pause(self, name: str) -> None:
        self.changed()
        self.scheduler.pause(name)

    def resume(self, name: str) -> None:
        self.changed()
        self.scheduler.resume(name)

    def get(self, name: str) -> Schedule | None:
        return self.scheduler.get(name)

    def schedules(self, *, name_prefix: str = "") -> list[Schedule]:
        return self.scheduler.schedules(name_prefix=name_prefix)

    def delete(self, name: str) -> None:
        self.changed()
        self.scheduler.delete(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scheduler, name)
