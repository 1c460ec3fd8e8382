"""TaskRunner: run an app's tasks inside a test, on a virtual clock, and answer what they wait for.

The runner plays Lambda and the outside world for one test. It points the app at fresh
in-memory S3 and SQS (or moto's), runs each continuation as an invocation of ``budget_s``
seconds, and keeps a virtual clock that jumps over waits, so a task that sleeps for a month
finishes at once. A task runs whenever the test hands control to the runner: ``run`` takes it
to its end or until it waits for something only the test can give (a callback's answer, a
signal); answering runs it on again; ``advance`` moves the clock and runs what became due.

The virtual clock is freezegun's, which moves moto's clocks too: inside the runner's block
``time.time()`` and ``datetime.now()`` read it, in the test's code as in the task's (pytest's
own timing keeps the real clock).

Example:
    >>> with TaskRunner(app) as runner:  # doctest: +SKIP
    ...     task = runner.run("approve", {"item": "kayak"})
    ...     task.callback("manager").complete({"approved": True})
    ...     assert task.result == "shipped kayak"
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal

from continuum._app.app import Continuum
from continuum._base.clock import real_monotonic
from continuum._local.runtime import POLL_INTERVAL_S, LocalRuntime, moto_backend
from continuum._local.virtual_time import VirtualTime
from continuum._ops.client import Client
from continuum._turn.tasks import Task
from continuum._worker.sqs_batch import logger as worker_logger
from continuum.backends.queue import MAX_DELAY_S
from continuum.errors import ConfigurationError, ContinuumError
from continuum.testing.handles import TaskHandle
from continuum.testing.observe import StepLog, observing

#: A task, by its name or as the object ``@app.task`` returned.
TaskRef = str | Task[Any]
#: Seconds, or a timedelta.
Duration = float | timedelta
#: The memory backend's longest continuation delay unless given: ten years, so that a long
#: sleep is one message rather than a hop every 900 s (hops run no task code; continuum's own
#: suite proves them).
MEMORY_MAX_DELAY_S = 10 * 365 * 86400


class TaskRunner:
    """Runs an app's tasks for a test: in memory (or on moto), on a virtual clock.

    Use it as a context manager. Inside the block the app uses the runner's S3 and SQS, its
    tasks' steps are counted (of the tasks registered when the block begins), the clock is
    virtual and the worker's logs are quiet; on leaving it, all of that is undone (the app
    points where it pointed before).

    Args:
        app: the app whose tasks to run.
        backend: "memory" (continuum's in-memory S3 and SQS: fast) or "moto" (moto's, in
            process; needs ``continuum-lambda[local]``).
        budget_s: each invocation's deadline, in seconds (Lambda's 900 by default; a smaller
            one shows continuations).
        virtual_time: run on a virtual clock that ticks with the wall clock and jumps to the
            next due timer when nothing else can run. False: the real clock (waits take as
            long as they say).
        start_at: where the virtual clock starts (default: now).
        max_delay_s: the longest delay of one continuation. By default, on the memory backend,
            a sleep of any length is one message; on moto, SQS's 900 s, so a long sleep is a
            chain of timer hops as on AWS (900 on the memory backend does the same).
        quiet: keep the worker's logs below ERROR out of the test's output.
        scheduler: give the app a continuation scheduler (in memory, or EventBridge Scheduler
            on moto) and fire its schedules on the runner's clock, as on a deployed stack: a
            wait past one delayed message is then one schedule, not a chain of hops, and the
            app's declared schedules fire as ``advance`` moves the clock past their times (not
            while ``run`` drives one task). False: no scheduler (long waits hop).
        timeout_s: the most wall-clock seconds one call may run tasks for before it gives up.

    Example:
        >>> with TaskRunner(app) as runner:  # doctest: +SKIP
        ...     task = runner.run("word_count", {"lines": ["the tide comes in"]})
        ...     assert task.result == {"comes": 1, "in": 1, "the": 1, "tide": 1}
        ...     assert task.step_counts == {"count_words": 1}
    """

    def __init__(
        self,
        app: Continuum,
        *,
        backend: Literal["memory", "moto"] = "memory",
        budget_s: float = 900.0,
        virtual_time: bool = True,
        start_at: datetime | None = None,
        max_delay_s: int | None = None,
        quiet: bool = True,
        timeout_s: float = 60.0,
        scheduler: bool = True,
    ) -> None:
        if backend not in ("memory", "moto"):
            raise ConfigurationError(
                f"unknown backend {backend!r} for TaskRunner", hint='use "memory" or "moto"'
            )
        self.app = app
        self.backend = backend
        self.budget_s = budget_s
        self.virtual_time = virtual_time
        self.start_at = start_at
        if max_delay_s is None:
            max_delay_s = MEMORY_MAX_DELAY_S if backend == "memory" else MAX_DELAY_S
        self.max_delay_s = max_delay_s
        self.quiet = quiet
        self.timeout_s = timeout_s
        self.scheduler = scheduler
        #: every live step execution of the app's tasks while the runner is open.
        self.log = StepLog()
        #: a clock to use instead of a new one (``check_replay_safe`` shares one across runs).
        self._clock: VirtualTime | None = None
        self._runtime: LocalRuntime | None = None
        self._stack: contextlib.ExitStack | None = None

    # -- the block -------------------------------------------------------------------------------

    def __enter__(self) -> TaskRunner:
        if self._stack is not None:
            raise ConfigurationError("this TaskRunner is already open; make another one")
        with contextlib.ExitStack() as stack:
            if self.backend == "moto":
                stack.enter_context(moto_backend())
            stack.enter_context(_backends_kept(self.app))
            clock = None
            if self.virtual_time and (self._clock is not None or self.start_at is not None):
                clock = self._clock or VirtualTime(self.start_at)
            runtime = LocalRuntime(
                self.app,
                budget_s=self.budget_s,
                backend=self.backend,
                virtual_time=self.virtual_time,
                max_delay_s=self.max_delay_s,
                scheduler=self.scheduler,
                clock=clock,  # the app's schedules are made at its start, not at the real now
            )
            stack.enter_context(runtime.time.running())
            stack.enter_context(observing(self.app, self.log))
            if self.quiet:
                stack.enter_context(_quiet_worker())
            self._runtime, self._stack = runtime, stack.pop_all()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        stack, self._stack, self._runtime = self._stack, None, None
        if stack is not None:
            stack.close()

    @property
    def runtime(self) -> LocalRuntime:
        """The local runtime underneath (its store, queue and invocations)."""
        if self._runtime is None:
            raise ConfigurationError(
                "the TaskRunner is not open",
                hint="use it in a with block: with TaskRunner(app) as r",
            )
        return self._runtime

    @property
    def client(self) -> Client:
        """The app's client, on the runner's backend (start, status, signal, ...)."""
        _ = self.runtime
        return self.app.client()

    @property
    def now(self) -> datetime:
        """The runner's time: the virtual clock's (or the real one's, in real time)."""
        _ = self.runtime
        return datetime.now(UTC)

    # -- starting and running tasks --------------------------------------------------------------

    def start(self, task: TaskRef, input: Any, *, task_id: str | None = None) -> TaskHandle:
        """Start a task without running it yet (``handle.run()`` runs it).

        Raises:
            UnknownTaskError, InvalidInputError, InvalidTaskIdError: as ``Client.start``.
        """
        name = task.name if isinstance(task, Task) else str(task)
        return TaskHandle(self, self.client.start(name, input, task_id=task_id))

    def run(self, task: TaskRef, input: Any, *, task_id: str | None = None) -> TaskHandle:
        """Start a task and run it until it ends, or waits for a callback or a signal.

        Sleeps and other timers are jumped over on the virtual clock; a callback's or a
        signal's timeout is not (``advance`` or ``handle.run_until_done`` lets it fire).
        """
        return self.start(task, input, task_id=task_id).run()

    def handle(self, task_id: str) -> TaskHandle:
        """A handle for a task already started (by id)."""
        self.runtime.record(task_id)  # raises RecordNotFoundError for an unknown id
        return TaskHandle(self, task_id)

    def advance(self, duration: Duration) -> None:
        """Move the virtual clock ``duration`` on, running every task's timers in order as
        they come due on the way (a sleep ending, a timeout, a retry's backoff).

        Raises:
            ConfigurationError: the runner runs in real time.
        """
        clock = self.runtime.time
        if not isinstance(clock, VirtualTime):
            raise ConfigurationError(
                "advance needs the virtual clock", hint="make the runner with virtual_time=True"
            )
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        target = time.time() + max(0.0, float(seconds))
        self.settle()
        while (due := self.runtime.next_due()) is not None and due <= target:
            clock.wait_until(due, poll_s=POLL_INTERVAL_S)
            self.settle()
        clock.advance(target - time.time())
        self.settle()

    def settle(self) -> None:
        """Run every continuation that is due now, until none is (the clock does not move)."""
        started = real_monotonic()
        while self.runtime.invoke_once() is not None:
            if real_monotonic() - started > self.timeout_s:
                raise ContinuumError(
                    f"tasks kept running for more than {self.timeout_s:.0f}s of wall time",
                    hint="a task that never ends? raise TaskRunner(timeout_s=...) if it is slow",
                )

    def drive(self, task_id: str, *, until_done: bool = False) -> None:
        """Run invocations until the task ends, or (unless ``until_done``) waits for a
        callback or a signal; with ``until_done``, timeouts fire (``handle.run_until_done``).

        The app's recurring schedules do not fire meanwhile (their times the clock jumps over
        pass): only ``advance`` and ``settle`` fire them, so a test of one task runs that task.
        """
        with self.runtime.recurring_held():
            self.runtime.drive(task_id, timeout_s=self.timeout_s, stop_when_waiting=not until_done)


@contextlib.contextmanager
def _backends_kept(app: Continuum) -> Iterator[None]:
    """Undo the runner's ``app.configure`` afterwards: the app points where it pointed before
    (not at a moto that has stopped, from where boto3 would reach for real AWS)."""
    kept = copy.copy(app._backends)
    try:
        yield
    finally:
        app._backends = kept
        app.configure()  # drops the records, continuations and worker built on the runner's


@contextlib.contextmanager
def _quiet_worker() -> Iterator[None]:
    level = worker_logger.log_level
    worker_logger.setLevel("ERROR")
    try:
        yield
    finally:
        worker_logger.setLevel(level)
