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

from continuum.app import Continuum
from continuum.batch import logger as worker_logger
from continuum.client import Client, waiting_for
from continuum.clocks import VirtualTime, real_monotonic
from continuum.errors import (
    ConfigurationError,
    ContinuumError,
    TaskFailedError,
    TaskNotFinishedError,
)
from continuum.local import POLL_INTERVAL_S, LocalRuntime, moto_backend
from continuum.queue import MAX_DELAY_S
from continuum.record import Counters, ErrorInfo, Status, TaskRecord
from continuum.tasks import Task
from continuum.testing.observe import StepLog, StepRun, observing
from continuum.values import from_json
from continuum.waiters import Waiter, WaitKind

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
            process; needs ``continuum[local]``).
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
            runtime = LocalRuntime(
                self.app,
                budget_s=self.budget_s,
                backend=self.backend,
                virtual_time=self.virtual_time,
                max_delay_s=self.max_delay_s,
            )
            if self.virtual_time and (self._clock is not None or self.start_at is not None):
                runtime.time = self._clock or VirtualTime(self.start_at)
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

    def _drive(self, task_id: str, *, until_done: bool) -> None:
        self.runtime.drive(task_id, timeout_s=self.timeout_s, stop_when_waiting=not until_done)


class TaskHandle:
    """A task started by a :class:`TaskRunner`: read it, answer it, run it on.

    Each property reads the task's record afresh. The methods that answer the task (a
    callback, a signal, a cancel request) then run it until it ends or waits for the outside
    world again, and return the handle.

    Attributes:
        task_id: the task's id.
    """

    def __init__(self, runner: TaskRunner, task_id: str) -> None:
        self.runner = runner
        self.task_id = task_id

    def __repr__(self) -> str:
        try:
            return f"<TaskHandle {self.task_id!r} {self.status.value}>"
        except ContinuumError:  # the runner is closed
            return f"<TaskHandle {self.task_id!r}>"

    # -- what it is doing ------------------------------------------------------------------------

    @property
    def record(self) -> TaskRecord:
        """The task's record, as stored now."""
        return self.runner.runtime.record(self.task_id)

    @property
    def status(self) -> Status:
        """``pending``, ``running``, ``suspended``, ``waiting``, or how it ended."""
        return self.record.status

    @property
    def result(self) -> Any:
        """The task's result, as the task returned it (rebuilt by its return annotation).

        Raises:
            TaskFailedError: the task failed or was cancelled; the message gives the error's
                type, message and step, and the exception that failed it (with its
                traceback) is the ``__cause__``.
            TaskNotFinishedError: the task has not ended; the message says what it waits for.
        """
        record = self.record
        if record.status == Status.SUCCEEDED:
            task = self.runner.app.registry.task(record.task_name, task_id=self.task_id)
            return from_json(task.result_adapter, record.result)
        if record.status.finished:
            error = record.error or ErrorInfo(type="Error", message=record.status.value)
            raise TaskFailedError(
                f"task {record.task_name!r} {record.status.value}: {error.type}: {error.message}",
                task_id=self.task_id,
                step=error.step,
            ) from self.runner.log.errors.get(self.task_id)
        raise self._not_finished(record)

    @property
    def error(self) -> ErrorInfo | None:
        """Why the task failed or was cancelled (type, message, step, turn); None otherwise."""
        return self.record.error

    @property
    def waiting_for(self) -> list[Waiter]:
        """What the task waits for now, then every callback it created and has not taken an
        answer for (each with its kind, name, id and deadline)."""
        return waiting_for(self.record)

    @property
    def counters(self) -> Counters:
        """The record's counters: invocations, continuations, turns, steps executed and
        replayed, waits, hops, ..."""
        return self.record.counters

    @property
    def step_runs(self) -> list[StepRun]:
        """Each live execution of a step for this task, in order (key, turn, arguments,
        outcome). A step replayed from the journal did not run, and is not here."""
        return self.runner.log.of(self.task_id)

    @property
    def step_counts(self) -> dict[str, int]:
        """Live executions per step name: ``{"count_words": 3}``."""
        return self.runner.log.counts(self.task_id)

    # -- running it ------------------------------------------------------------------------------

    def run(self) -> TaskHandle:
        """Run the task until it ends, or waits for a callback or a signal."""
        self.runner._drive(self.task_id, until_done=False)
        return self

    def run_until_done(self) -> TaskHandle:
        """Run the task until it ends, letting every timer fire: an unanswered callback or
        signal times out when its timeout comes.

        Raises:
            TaskNotFinishedError: the task waits for something with no timeout.
        """
        self.runner._drive(self.task_id, until_done=True)
        record = self.record
        if not record.status.finished:
            raise self._not_finished(record)
        return self

    def callback(self, name: str | None = None) -> CallbackHandle:
        """The callback the task created by ``name`` and has not taken an answer for (the only
        one, if no name is given).

        Raises:
            ContinuumError: the task has no such open callback (the message lists those it has).
        """
        open_ = [w for w in self.waiting_for if w.kind == WaitKind.CALLBACK]
        found = [w for w in open_ if name is None or w.name == name]
        if len(found) == 1 and found[0].id is not None:
            return CallbackHandle(self, found[0].name, found[0].id)
        names = ", ".join(repr(w.name) for w in open_) or "none"
        wanted = f"callback {name!r}" if name is not None else "one open callback"
        raise ContinuumError(
            f"the task has not {wanted}; its open callbacks: {names} ({self.status.value})",
            task_id=self.task_id,
            hint="run the task until it creates the callback, and name it if it has several",
        )

    def signal(self, name: str, payload: Any = None, *, signal_id: str | None = None) -> TaskHandle:
        """Send signal ``name`` with ``payload`` (kept until a wait takes it), then run on."""
        self.runner.client.signal(self.task_id, name, payload, signal_id=signal_id)
        return self.run()

    def cancel(self, reason: str | None = None) -> TaskHandle:
        """Ask the task to stop (it sees TaskCancelledError at its next boundary), then run on."""
        self.runner.client.cancel(self.task_id, reason)
        return self.run()

    def _not_finished(self, record: TaskRecord) -> TaskNotFinishedError:
        waits = ", ".join(f"{w.kind.value} {w.name!r}" for w in waiting_for(record))
        doing = f"{record.status.value}, waiting for {waits}" if waits else record.status.value
        return TaskNotFinishedError(
            f"task {record.task_name!r} has not ended: it is {doing}",
            task_id=self.task_id,
            generation=record.generation,
            hint="answer it (handle.callback(name).complete(...), handle.signal(...)), or let "
            "its timers fire (runner.advance(...), handle.run_until_done())",
        )


class CallbackHandle:
    """A callback a task waits for (or will): answer it as the outside world would.

    Attributes:
        name: the callback's name.
        id: its id (what ``cb.id`` gave the task).
    """

    def __init__(self, task: TaskHandle, name: str, callback_id: str) -> None:
        self.task = task
        self.name = name
        self.id = callback_id

    def __repr__(self) -> str:
        return f"<CallbackHandle {self.name!r} of {self.task.task_id!r}>"

    def complete(self, result: Any = None) -> TaskHandle:
        """Answer it with ``result`` (JSON), then run the task on."""
        self.task.runner.client.complete_callback(self.id, result)
        return self.task.run()

    def fail(self, error_type: str, message: str) -> TaskHandle:
        """Fail it (``cb.result()`` raises CallbackFailedError), then run the task on."""
        self.task.runner.client.fail_callback(self.id, error_type, message)
        return self.task.run()

    def heartbeat(self) -> TaskHandle:
        """Tell the task the outside world still works on it (moves its heartbeat deadline)."""
        self.task.runner.client.heartbeat_callback(self.id)
        return self.task


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
