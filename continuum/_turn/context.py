"""TaskContext: what a task function, and through ``current_context()`` a step, sees.

It is a thin view over the running turn or child context (a
:class:`~continuum._turn.context_runner.ContextRunner`), which does the work. An operation
made of several calls (a callback's wait, a condition's polls) is written once, as a plan that
yields what to call and is sent what came of it; a sync method carries the plan out with
calls, its ``_async`` twin with awaits.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from pydantic import BaseModel

from continuum._base.clock import now_s
from continuum._define.callbacks import Callback
from continuum._define.steps import Step, active_runner, as_step, stable_name
from continuum._record.waiting_for import Duration, Signal, derived_name
from continuum._steps.control_flow import Paused
from continuum._waits.kinds import signal_wait
from continuum.errors import ConditionNotMetError, ContinuumError, TaskCancelledError

if TYPE_CHECKING:  # the batch models load with the fan-out, on its first use
    from continuum._define.completion import BatchResult, Completion
    from continuum._define.events import WaitStarted
    from continuum._fanout.branches import Branch
    from continuum._record.model import JournalEntry
    from continuum._turn.context_runner import ContextRunner

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")


class TaskContext(Generic[S]):
    """What a task function (and, through ``current_context()``, a step) sees.

    Attributes:
        state: the task's state; changes to it are kept when the turn completes.

    Example:
        >>> @app.task(state=Research)  # doctest: +SKIP
        ... def research(ctx: TaskContext[Research]) -> str | None:
        ...     ctx.state.notes.append(search(ctx.state.topic))
        ...     return None if len(ctx.state.notes) < 3 else "done"
    """

    def __init__(self, runner: ContextRunner, state: S) -> None:
        self._own = runner
        self.state = state

    @property
    def _runner(self) -> ContextRunner:
        """The runner of the code calling now: this context's, or, in an asyncio task of the
        same turn (or a child context of it), that one's, so it journals where it runs."""
        own = self._own
        active: Any = active_runner.get()
        if (
            active is None
            or active is own
            or active.state.scope.record is not own.state.scope.record
        ):
            return own
        runner: ContextRunner = active
        return runner

    def served_by(self, runner: ContextRunner) -> TaskContext[S]:
        """The same task's context (the same state) for a child context's runner."""
        return TaskContext(runner, self.state)

    @property
    def task_id(self) -> str:
        return self._runner.task_id

    @property
    def turn(self) -> int:
        """The number of this turn, from 0."""
        return self._runner.turn

    def step(
        self, fn: Callable[..., Any], *args: Any, key: str | None = None, **kwargs: Any
    ) -> Any:
        """Call ``fn`` as a step: journaled, timed, and replayed on re-entry.

        ``fn`` may be a decorated step, a function, a ``functools.partial`` or a callable
        object; its return annotation says what type a replay rebuilds. ``key`` names the call
        in the journal; by default it is the step's name and its ordinal within the turn.
        """
        return self._runner.call_step(as_step(fn), args, kwargs, key)

    async def step_async(
        self, fn: Callable[..., Any], *args: Any, key: str | None = None, **kwargs: Any
    ) -> Any:
        """In an async task: call ``fn`` as a step and await it. An ``async def`` is awaited;
        a sync function runs in a thread (in place if it is preemptible), so the event loop
        goes on meanwhile."""
        return await self._runner.call_step_async(as_step(fn), args, kwargs, key)

    def remaining(self) -> float:
        """Seconds left in this invocation."""
        return self._runner.remaining()

    # -- waits ---------------------------------------------------------------------------------

    def sleep(self, duration: Duration, *, name: str | None = None) -> None:
        """Wait ``duration`` (seconds or a timedelta) without compute: hours or months.

        The deadline is computed when the sleep is first reached and journaled; a sleep of a
        second or less that fits in the invocation is slept in place.

        Example:
            >>> ctx.sleep(timedelta(days=3))  # doctest: +SKIP
        """
        self._runner.sleep(duration, name)

    async def sleep_async(self, duration: Duration, *, name: str | None = None) -> None:
        """``sleep`` in an async task: a short sleep in place is awaited, not slept."""
        await self._runner.sleep_async(duration, name)

    def create_callback(
        self,
        name: str | None = None,
        *,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        request: Any = None,
    ) -> Callback:
        """Create a callback: hand ``cb.id`` to a person or a service, then ``cb.result()``.

        ``client.complete_callback(id, result)`` or ``fail_callback`` answers it;
        ``heartbeat_callback`` keeps it alive when ``heartbeat_timeout`` is set. The id is
        unguessable and saved in the record before it is returned.

        ``request`` is JSON that says what the callback asks, shown wherever the callback is
        (``continuum status``, ``inspect``, the dev UI); its ``"expects"`` (a JSON Schema) makes
        the client refuse answers of another shape, and its ``"answers"`` names ready answers
        (``continuum._base.json_shapes``). It may be a function of the callback id that returns it.
        """
        return self._runner.create_callback(name, timeout, heartbeat_timeout, request)

    def wait_for_callback(
        self,
        submitter: Callable[[str], Any],
        *,
        name: str | None = None,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        retries: int = 0,
        backoff_s: float = 1.0,
        request: Any = None,
    ) -> Any:
        """Create a callback (with its ``request``, as ``create_callback``), run
        ``submitter(callback_id)`` as a step (with ``retries``), and wait for its result.

        A submitter with a parameter named ``url`` is also given the callback's link
        (``cb.url``: None without a link endpoint).

        Example:
            >>> approved = ctx.wait_for_callback(ask_a_person, timeout=3600)  # doctest: +SKIP
        """
        return _drive(
            self,
            self._callback_wait(
                submitter, name, timeout, heartbeat_timeout, retries, backoff_s, request
            ),
        )

    async def wait_for_callback_async(
        self,
        submitter: Callable[[str], Any],
        *,
        name: str | None = None,
        timeout: Duration | None = None,
        heartbeat_timeout: Duration | None = None,
        retries: int = 0,
        backoff_s: float = 1.0,
        request: Any = None,
    ) -> Any:
        """``wait_for_callback`` in an async task: ``submitter`` may be ``async def``, and it
        is awaited as a step."""
        return await _drive_async(
            self,
            self._callback_wait(
                submitter, name, timeout, heartbeat_timeout, retries, backoff_s, request
            ),
        )

    def _callback_wait(
        self,
        submitter: Callable[[str], Any],
        name: str | None,
        timeout: Duration | None,
        heartbeat_timeout: Duration | None,
        retries: int,
        backoff_s: float,
        request: Any,
    ) -> Plan[Any]:
        callback = self.create_callback(
            name, timeout=timeout, heartbeat_timeout=heartbeat_timeout, request=request
        )
        submit = as_step(
            submitter, name=f"{callback.name}.submit", retries=retries, backoff_s=backoff_s
        )
        given = {"url": callback.url} if _takes_url(submitter) else {}
        with _Operation(self._runner, "wait_for_callback", callback.name):
            yield _StepCall(submit, (callback.id,), given)
            return callback.result()

    async def wait_for_signal_async(
        self, name: str, *, timeout: Duration | None = None
    ) -> Signal | None:
        """``wait_for_signal`` in an async task."""
        return self.wait_for_signal(name, timeout=timeout)

    def wait_for_signal(self, name: str, *, timeout: Duration | None = None) -> Signal | None:
        """Take the oldest signal ``name`` from the task's mailbox, waiting for one without
        compute; None if ``timeout`` passes first. A signal sent before the wait is kept."""
        return self._runner.waits.run(signal_wait.enter, name, timeout)

    # -- fan-out ------------------------------------------------------------------------------

    def child_context(
        self, fn: Callable[..., T], *args: Any, name: str | None = None, virtual: bool = False
    ) -> T:
        """Run ``fn(child_ctx, *args)`` as a named block: its steps are journaled under its
        name (``name#0/fetch#1``) and its result as one unit, so a finished block returns its
        result on replay without running.

        ``virtual=True``: a grouping that writes no entry of its own (AWS's ``is_virtual``):
        its steps are keyed under its name alike, but journaled in this context's journal,
        and its result is not journaled, so on replay ``fn`` runs again and its steps replay.

        Example:
            >>> summary = ctx.child_context(summarize, doc, name="summary")  # doctest: +SKIP
        """
        from continuum._fanout import branches

        run = branches.virtual_context if virtual else branches.child_context
        value: T = run(self._runner, fn, args, name)
        return value

    def parallel(
        self,
        branches: Sequence[Callable[[TaskContext[S]], Any]]
        | Mapping[str, Callable[[TaskContext[S]], Any]],
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        completion: Completion | None = None,
    ) -> BatchResult:
        """Run each branch ``fn(child_ctx)`` in its own child context, side by side on threads
        of this invocation (at most ``max_concurrency`` at once); the results in order.

        ``branches`` is a list, or a dict of name -> branch. A wait or a suspension inside a
        branch suspends the task; on replay, finished branches return their results.
        """
        batch = _Batch(_named(branches), name or "parallel", max_concurrency, completion)
        return batch.run(self._runner)

    def map(
        self,
        items: Iterable[Any],
        fn: Callable[[TaskContext[S], Any, int], Any],
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        completion: Completion | None = None,
    ) -> BatchResult:
        """Run ``fn(child_ctx, item, index)`` for each item, each in its own child context,
        side by side on threads of this invocation; the results in index order.

        Example:
            >>> pages = ctx.map(urls, fetch_page, max_concurrency=10).values()  # doctest: +SKIP
        """
        batch = _Batch(_items(items, fn), name or stable_name(fn), max_concurrency, completion)
        return batch.run(self._runner)

    def invoke(
        self,
        task_name: str,
        input: Any,
        *,
        name: str | None = None,
        timeout: Duration | None = None,
    ) -> Any:
        """Run ``task_name`` as a child task (its own record and invocations) and wait for its
        result, without compute. Its id derives from this call's place in the journal, so a
        replay never starts it twice.

        Raises:
            ChildTaskError: the child failed, was cancelled, or did not finish by ``timeout``.
        """
        from continuum._fanout.invoke import invoke

        return invoke(self._runner, task_name, input, name, timeout)

    def map_tasks(
        self,
        task_name: str,
        inputs: Iterable[Any],
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        completion: Completion | None = None,
    ) -> BatchResult:
        """One child task of ``task_name`` per input, in parallel Lambdas, at most
        ``max_concurrency`` running at once; their results in index order, as a batch."""
        from continuum._fanout.invoke import map_tasks

        return map_tasks(self._runner, task_name, list(inputs), name, max_concurrency, completion)

    # -- fan-out in an async task ------------------------------------------------------------------

    async def child_context_async(
        self, fn: Callable[..., Any], *args: Any, name: str | None = None, virtual: bool = False
    ) -> Any:
        """``child_context`` in an async task: await ``fn(child_ctx, *args)`` as a named,
        journaled block (``virtual=True``: a grouping with no entry of its own). A plain
        ``def`` is called in place, its steps journaled in the block as ``child_context`` does."""
        from continuum._fanout import branches

        run = branches.virtual_context_async if virtual else branches.child_context_async
        return await run(self._runner, fn, args, name)

    async def parallel_async(
        self,
        branches: Sequence[Callable[[TaskContext[S]], Any]]
        | Mapping[str, Callable[[TaskContext[S]], Any]],
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        completion: Completion | None = None,
    ) -> BatchResult:
        """``parallel`` in an async task: each branch ``async def fn(child_ctx)`` runs as an
        asyncio task on the invocation's loop (at most ``max_concurrency`` at once); a plain
        ``def`` branch runs in place in its own child context, holding the loop meanwhile."""
        batch = _Batch(_named(branches), name or "parallel", max_concurrency, completion)
        return await batch.run_async(self._runner)

    async def map_async(
        self,
        items: Iterable[Any],
        fn: Callable[[TaskContext[S], Any, int], Any],
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        completion: Completion | None = None,
    ) -> BatchResult:
        """``map`` in an async task: ``async def fn(child_ctx, item, index)`` for each item,
        as asyncio tasks on the invocation's loop; the results in index order. A plain ``def``
        runs in place in each item's child context, holding the loop meanwhile."""
        batch = _Batch(_items(items, fn), name or stable_name(fn), max_concurrency, completion)
        return await batch.run_async(self._runner)

    async def invoke_async(
        self,
        task_name: str,
        input: Any,
        *,
        name: str | None = None,
        timeout: Duration | None = None,
    ) -> Any:
        """``invoke`` in an async task: the child task runs in its own invocations; this one
        waits for its result without compute."""
        return self.invoke(task_name, input, name=name, timeout=timeout)

    async def map_tasks_async(
        self,
        task_name: str,
        inputs: Iterable[Any],
        *,
        name: str | None = None,
        max_concurrency: int | None = None,
        completion: Completion | None = None,
    ) -> BatchResult:
        """``map_tasks`` in an async task."""
        return self.map_tasks(
            task_name,
            inputs,
            name=name,
            max_concurrency=max_concurrency,
            completion=completion,
        )

    def wait_for_condition(
        self,
        check: Callable[[T], T],
        *,
        initial: T,
        done: Callable[[T], bool],
        delay_s: float = 5.0,
        max_attempts: int | None = None,
        name: str | None = None,
    ) -> T:
        """Poll: ``state = check(state)`` as a step, until ``done(state)``, sleeping ``delay_s``
        between checks without compute. Returns the last state.

        Raises:
            ConditionNotMetError: ``max_attempts`` checks ran and ``done`` never held.
        """
        value: T = _drive(
            self, self._condition_wait(check, initial, done, delay_s, max_attempts, name)
        )
        return value

    async def wait_for_condition_async(
        self,
        check: Callable[[T], Any],
        *,
        initial: T,
        done: Callable[[T], bool],
        delay_s: float = 5.0,
        max_attempts: int | None = None,
        name: str | None = None,
    ) -> T:
        """``wait_for_condition`` in an async task: ``check`` may be ``async def`` (awaited as
        a step), and the delays are ``sleep_async``."""
        value: T = await _drive_async(
            self, self._condition_wait(check, initial, done, delay_s, max_attempts, name)
        )
        return value

    def _condition_wait(
        self,
        check: Callable[[T], Any],
        initial: T,
        done: Callable[[T], bool],
        delay_s: float,
        max_attempts: int | None,
        name: str | None,
    ) -> Plan[T]:
        poll = _ConditionWatch.start(self, check, max_attempts, name)
        state = initial
        while True:
            live = poll.before_check()
            try:
                state = yield _StepCall(poll.step, (state,), {})
            except Exception as exc:
                poll.raised(exc, live=live)
                raise
            if poll.holds(done(state), live=live):
                return state
            yield _Sleep(delay_s, poll.delay_name)

    @property
    def idempotency_key(self) -> str:
        """A key for the step running now, stable across its retries and re-executions.

        Pass it to an external system so that it can deduplicate a step that ran twice
        because a worker died before the journal recorded it.
        """
        return self._in_step("idempotency_key")

    @property
    def cursor(self) -> Any:
        """Inside a cooperative step: the cursor it last paused with, or None."""
        self._in_step("cursor")
        return self._runner.active_cursor

    def pause(self, cursor: Any) -> None:
        """Inside a step: save ``cursor`` (JSON) and continue this step in a fresh invocation.

        The step is called again with the same arguments and ``ctx.cursor == cursor``. Use it
        in a step that loops (a paginated download, a long stream) when ``ctx.remaining()``
        runs low, so one logical step can span several invocations.
        """
        self._in_step("pause()")
        raise Paused(cursor)

    def _in_step(self, what: str) -> str:
        key = self._runner.active_key
        if key is None:
            raise ContinuumError(
                f"{what} is only available while a step runs", task_id=self.task_id
            )
        return key


class _ConditionWatch:
    """The checks of a ``wait_for_condition``: counted against ``max_attempts``, and told to
    the observers as a wait: started when its first check runs live, ended when the check that
    holds (or the last allowed) runs live, from the time its first check began (kept in that
    check's journal entry, across invocations)."""

    def __init__(
        self, runner: ContextRunner, step: Step[Any, Any], max_attempts: int | None
    ) -> None:
        self.state = runner.state
        self.step = step
        self.name = step.name
        self.delay_name = derived_name(step.name, "delay")
        self.max_attempts = max_attempts
        self.attempts = 0
        self.first: JournalEntry | None = None
        self.began = 0.0

    @classmethod
    def start(
        cls,
        ctx: TaskContext[Any],
        check: Callable[..., Any],
        max_attempts: int | None,
        name: str | None,
    ) -> _ConditionWatch:
        if max_attempts is not None and max_attempts < 1:
            raise ContinuumError("max_attempts must be at least 1", task_id=ctx.task_id)
        label = name or stable_name(check)
        return cls(ctx._runner, as_step(check, name=label), max_attempts)

    def holds(self, done: bool, *, live: bool) -> bool:
        """After a check: whether the condition holds (raise if no check is left)."""
        self.attempts += 1
        self.after_check(first=self.attempts == 1, live=live)
        if done:
            self.ended(live=live)
            return True
        if self.max_attempts is not None and self.attempts >= self.max_attempts:
            error = ConditionNotMetError(
                f"condition {self.name!r} did not hold after {self.attempts} checks",
                task_id=self.state.task_id,
                step=self.name,
            )
            self.ended(live=live, error=error.message)
            raise error
        return False

    def raised(self, exc: Exception, *, live: bool) -> None:
        """After a check that raised: the condition ends with its error."""
        self.attempts += 1
        self.after_check(first=self.attempts == 1, live=live)
        self.ended(live=live, error=f"{type(exc).__name__}: {exc}")

    def before_check(self) -> bool:
        """Whether the next check runs live (nothing left to replay); notes when it begins."""
        journal = self.state.journal
        live = journal.position >= len(journal.entries)
        if live:
            self.began = now_s()
        return live

    def after_check(self, *, first: bool, live: bool) -> None:
        if not first or self.state.scope.observers is None:
            return
        journal = self.state.journal
        self.first = journal.entries[journal.position - 1]
        if live:
            self.first.since = self.began
            self.state.emit("wait_started", self._started(self.began))

    def ended(self, *, live: bool, error: str | None = None) -> None:
        if not live or self.first is None or self.state.scope.observers is None:
            return
        from continuum._define.events import WaitEnded

        started = self._started(self.first.since or self.began)
        event = WaitEnded(
            *(started.task_id, started.kind, started.name, started.key, started.turn),
            started_at=started.started_at,
            ended_at=now_s(),
            outcome="ok" if error is None else "failed",
            error=error,
            replay=self.state.began_earlier(started.started_at),
        )
        self.state.emit("wait_ended", event)

    def _started(self, at: float) -> WaitStarted:
        from continuum._define.events import WaitStarted

        assert self.first is not None
        key = self.state.path + self.first.key
        return WaitStarted(self.state.task_id, "condition", self.name, key, self.state.turn, at)


class _Operation:
    """Tells the observers that the operations called inside it (until its block ends) make
    one operation, whose entry is the one just journaled (a callback's); nothing when a
    control-flow exception leaves it: the operation goes on in a later invocation."""

    def __init__(self, runner: ContextRunner, kind: str, name: str) -> None:
        state = self.state = runner.state
        self.started: Any = None
        if state.scope.observers is None:
            return
        from continuum._define.events import OperationStarted

        entry = state.journal.entries[state.journal.position - 1]
        if entry.since is None:  # first reached: its start is kept with the journal
            entry.since = now_s()
        self.started = OperationStarted(
            state.task_id, kind, name, state.path + entry.key, state.turn, entry.since
        )

    def __enter__(self) -> None:
        if self.started is not None:
            self.state.emit("operation_started", self.started)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        started = self.started
        if started is None or (exc is not None and not isinstance(exc, Exception)):
            return
        from continuum._define.events import OperationEnded

        ended = OperationEnded(
            *(started.task_id, started.kind, started.name, started.key, started.turn),
            started_at=started.started_at,
            ended_at=now_s(),
            outcome="ok"
            if exc is None
            else "cancelled"
            if isinstance(exc, TaskCancelledError)
            else "failed",
            error=None if exc is None else f"{type(exc).__name__}: {exc}",
        )
        self.state.emit("operation_ended", ended)


# -- operations written once: what a sync method calls, its _async twin awaits ------------------


class _StepCall:
    """Call ``step`` through the journal, as ``ctx.step`` does; its value is the answer."""

    __slots__ = ("args", "kwargs", "step")

    def __init__(self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.step, self.args, self.kwargs = step, args, kwargs

    def run(self, runner: ContextRunner) -> Any:
        return runner.call_step(self.step, self.args, self.kwargs, None)

    async def run_async(self, runner: ContextRunner) -> Any:
        return await runner.call_step_async(self.step, self.args, self.kwargs, None)


class _Sleep:
    """Wait ``duration`` as ``ctx.sleep`` does."""

    __slots__ = ("duration", "name")

    def __init__(self, duration: Duration, name: str | None) -> None:
        self.duration, self.name = duration, name

    def run(self, runner: ContextRunner) -> None:
        runner.sleep(self.duration, self.name)

    async def run_async(self, runner: ContextRunner) -> None:
        await runner.sleep_async(self.duration, self.name)


class _Batch:
    """Run ``branches`` as a batch, side by side, at most ``max_concurrency`` at once."""

    __slots__ = ("branches", "completion", "label", "max_concurrency")

    def __init__(
        self,
        branches: list[Branch],
        label: str,
        max_concurrency: int | None,
        completion: Completion | None,
    ) -> None:
        self.branches, self.label = branches, label
        self.max_concurrency, self.completion = max_concurrency, completion

    def run(self, runner: ContextRunner) -> BatchResult:
        from continuum._fanout.batches import run_batch

        return run_batch(
            runner,
            self.branches,
            label=self.label,
            max_concurrency=self.max_concurrency,
            completion=self.completion,
        )

    async def run_async(self, runner: ContextRunner) -> BatchResult:
        from continuum._fanout.batches import run_batch_async

        return await run_batch_async(
            runner,
            self.branches,
            label=self.label,
            max_concurrency=self.max_concurrency,
            completion=self.completion,
        )


#: An operation of several calls, written once: it yields each (a step call, a sleep), is
#: sent its answer (or has what it raised thrown in), and returns the operation's result.
Plan: TypeAlias = Generator["_StepCall | _Sleep", Any, T]


def _drive(ctx: TaskContext[Any], plan: Plan[T]) -> T:
    """Carry out ``plan`` with calls (a sync task's method)."""
    try:
        call = next(plan)
        while True:
            try:
                answer = call.run(ctx._runner)
            except BaseException as exc:  # the plan sees it where it made the call
                call = plan.throw(exc)
            else:
                call = plan.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


async def _drive_async(ctx: TaskContext[Any], plan: Plan[T]) -> T:
    """Carry out ``plan`` with awaits (an async task's method)."""
    try:
        call = next(plan)
        while True:
            try:
                answer = await call.run_async(ctx._runner)
            except BaseException as exc:  # the plan sees it where it made the call
                call = plan.throw(exc)
            else:
                call = plan.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


def _named(
    branches: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
) -> list[Branch]:
    """``ctx.parallel``'s branches, named where they are given as a dict."""
    from continuum._fanout.branches import Branch

    named = branches.items() if isinstance(branches, Mapping) else ((None, b) for b in branches)
    return [Branch(fn=fn, name=label) for label, fn in named]


def _items(items: Iterable[Any], fn: Callable[..., Any]) -> list[Branch]:
    """``ctx.map``'s items, each ``fn(child_ctx, item, index)``."""
    from continuum._fanout.branches import Branch

    return [Branch(fn=fn, args=(item, i)) for i, item in enumerate(items)]


def current_context() -> TaskContext[Any]:
    """The context of the task running in this thread (for steps that need it).

    Example:
        >>> @app.step  # doctest: +SKIP
        ... def charge(amount: int) -> str:
        ...     return payments.charge(amount, idempotency_key=current_context().idempotency_key)
    """
    context = getattr(active_runner.get(), "ctx", None)
    if not isinstance(context, TaskContext):
        raise ContinuumError("no task is running in this thread")
    return context


def _takes_url(submitter: Callable[..., Any]) -> bool:
    """Whether ``submitter`` (a function, or a step of one) has a parameter named ``url``."""
    import inspect

    target: Any = submitter
    while hasattr(target, "fn") and callable(target.fn):  # a Step: look at its function
        target = target.fn
    try:
        return "url" in inspect.signature(target).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin): the id alone
        return False
