"""The event loop of an invocation, and the turns of async tasks on it.

One loop per invocation: the worker opens its slot around the handler
(``loop_slot.invocation_loop``), the first async turn makes it, and it is closed when the
handler returns, after cancelling what is left on it, so nothing of a task runs after its
invocation ended.

Keys by call order: the loop's task factory gives each asyncio task made while a turn runs
(by ``asyncio.gather``, ``create_task``, a ``TaskGroup``), outside a live step, a child context
of the context that made it, journaled at that point of its journal. Inside one asyncio task
the calls are sequential, so each journal replays in order, whatever order the tasks finished
in: ``gather(fetch(a), fetch(b))`` journals ``fetch#0/fetch#0`` and ``fetch#1/fetch#0``.

The end of a turn: when the task function returns or unwinds, the asyncio tasks it (or a step)
started that still run are awaited. When it unwinds (a suspension, a wait), they are told to
stop at their next step first. They get what is left of the invocation's budget; those still
running then are cancelled. A cancellation is final: a task whose turn was fenced or aborted
stops at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, cast

from continuum._base.clock import real_monotonic
from continuum._define.steps import active_runner, running
from continuum._fanout.branches import context_ended, enter, reached_here, type_of
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry, TaskRecord
from continuum._steps.control_flow import Abort, ControlFlow, Fenced, Suspend, Wait
from continuum._steps.failures import error_info
from continuum._steps.turn_state import Halt, TurnState
from continuum._turn import loop_slot
from continuum._turn.context_runner import ContextRunner
from continuum._turn.ending_order import EndingOrder
from continuum.errors import ContinuumError, NonDeterminismError

logger = logging.getLogger("continuum")

#: Where asyncio's own modules are (a task of their coroutine runs no task code).
_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep

#: Seconds the loop's close waits for cancelled tasks and the threads of sync steps.
CLOSE_WAIT_S = 2.0
#: When a turn unwinds, how often it looks whether its asyncio tasks still run a step.
STEP_POLL_S = 0.05


def run_async_turn(runner: ContextRunner, fn: Callable[..., Any]) -> Any:
    """Run one turn of an async task function on the invocation's loop (or, outside an
    invocation, on a loop of its own); its value, or what unwound it."""
    if loop_slot.opened():
        holder = loop_slot.current()
        if not isinstance(holder, InvocationLoop):
            holder = InvocationLoop()
            loop_slot.fill(holder)
        return holder.run_turn(runner, fn)
    holder = InvocationLoop()
    try:
        return holder.run_turn(runner, fn)
    finally:
        holder.close()


class TurnHalt(Halt):
    """Tells the asyncio tasks of a turn that ends to stop at their next step, and those beside
    one that a cancel was delivered to that they see it too."""

    def __init__(self, runners: dict[asyncio.Task[Any], ContextRunner]) -> None:
        super().__init__()
        self.runners = runners

    def unwinding(self) -> ControlFlow:
        return Suspend(f"the turn is ending: {self.reason}")

    def running(self) -> Iterator[tuple[asyncio.Future[Any], TurnState]]:
        """Each asyncio task the turn journals, with its state."""
        for task, runner in list(self.runners.items()):
            yield task, runner.state


class AsyncTurn:
    """The turn running on the loop: its record (to know its runners), its halt, and the
    runner of each asyncio task it journals."""

    __slots__ = ("endings", "halt", "record", "runners")

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.endings = EndingOrder(record.journal)
        self.runners: dict[asyncio.Task[Any], ContextRunner] = {}
        self.halt = TurnHalt(self.runners)

    def in_step(self, tasks: set[asyncio.Task[Any]]) -> bool:
        """Whether one of ``tasks`` is inside a live step now."""
        runners = self.runners
        return any(task in runners and runners[task].state.active_key is not None for task in tasks)


class InvocationLoop:
    """The event loop of one invocation, made on first use, and the turn running on it."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.turn: AsyncTurn | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            self.loop.set_task_factory(cast(Any, self._task))
            # asyncio's timers on the real clock: a user's freeze_time stops time.monotonic,
            # and an awaited asyncio.sleep would never end under it.
            self.loop.time = real_monotonic  # type: ignore[method-assign]
        return self.loop

    def run_turn(self, runner: ContextRunner, fn: Callable[..., Any]) -> Any:
        """Run ``fn(ctx)`` as the turn's root, then settle the asyncio tasks it left."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ContinuumError(
                "an async task's turn cannot run inside a running event loop in the same thread",
                task_id=runner.task_id,
                hint="run the worker, LocalRuntime or TaskRunner from sync code (a thread, "
                "or asyncio.to_thread) and not from inside a coroutine",
            )
        loop, state = self.get(), runner.state
        turn = self.turn = AsyncTurn(state.scope.record)
        state.halt = turn.halt
        state.serial = asyncio.Lock() if state.scope.record.recovering else None
        ident = threading.get_ident()
        outer = running.get(ident)
        running[ident] = runner
        try:
            root = asyncio.Task(runner.run_awaited(fn(runner.ctx)), loop=loop)
            try:
                loop.run_until_complete(root)
            except (KeyboardInterrupt, SystemExit):
                self._cancel_all(loop)
                raise
            except BaseException:  # noqa: S110 - the root's outcome is read from it below
                pass
            return self._settle(loop, runner, root)
        finally:
            self.turn = None
            state.halt, state.serial = None, None
            if outer is None:
                running.pop(ident, None)
            else:
                running[ident] = outer

    # -- the end of a turn ------------------------------------------------------------------------

    def _settle(
        self, loop: asyncio.AbstractEventLoop, runner: ContextRunner, root: asyncio.Task[Any]
    ) -> Any:
        """Await (or stop) the asyncio tasks the turn left; then return the root's value or
        raise what ends the turn."""
        assert self.turn is not None
        error = _outcome_error(root)
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        if pending:
            if isinstance(error, Fenced | Abort) or _fatal(error):
                self._cancel(loop, pending)
            else:
                left = runner.state.scope.budget.grace_s(runner.state.scope.record.save_stats)
                if error is None:  # the function returned: what it left running is awaited
                    _, late = loop.run_until_complete(asyncio.wait(pending, timeout=left))
                else:  # it unwound: the steps running now end, and the rest stops
                    self.turn.halt.stop(_reason(error))
                    late = self._steps_ended(loop, set(pending), left)
                if late:
                    names = ", ".join(sorted(_label(task.get_coro()) for task in late))  # type: ignore[arg-type]
                    logger.warning(
                        f"task {runner.task_id}: {len(late)} asyncio task(s) of the turn were "
                        f"still running at its end ({names}): cancelled",
                        extra={"task_id": runner.task_id},
                    )
                    self._cancel(loop, list(late))
        # What the others left: a fence or an abort anywhere ends the turn; when the function
        # returned, so does a suspension or wait of a task it left running (its work goes on
        # next time), but not an error: nothing awaited it, as nothing awaits one that fails
        # before the return, so the task's outcome does not hang on which came first.
        left_behind = [_outcome_error(task) for task in pending if task.done()]
        for strongest in (Fenced, Abort):
            for exc in (error, *left_behind):
                if isinstance(exc, strongest):
                    raise exc
        if isinstance(error, Wait):
            # Waits side by side (gather): the task waits for every wait its asyncio tasks
            # reached, not only for the one that unwound the function first.
            raise _merged(error, [_outcome_error(t) for t in self.turn.runners if t.done()])
        if error is not None:
            raise error
        for exc in left_behind:
            if isinstance(exc, ControlFlow):
                raise exc
        _log_unawaited_errors(runner, left_behind)
        if root.cancelled():
            raise ContinuumError(
                "the task's coroutine was cancelled (by the task's own code?)",
                task_id=runner.task_id,
                hint="cancel the asyncio tasks the task starts, never the task itself",
            )
        never_awaited(runner, self.turn)
        return root.result()

    def _steps_ended(
        self, loop: asyncio.AbstractEventLoop, pending: set[asyncio.Task[Any]], left: float
    ) -> set[asyncio.Task[Any]]:
        """Wait, at most ``left`` seconds, while one of ``pending`` is inside a live step (it
        stops at its next one); the tasks still running then."""
        assert self.turn is not None
        deadline = real_monotonic() + left
        while pending and self.turn.in_step(pending):
            wait = deadline - real_monotonic()
            if wait <= 0:
                break
            _, pending = loop.run_until_complete(
                asyncio.wait(
                    pending, timeout=min(wait, STEP_POLL_S), return_when=asyncio.FIRST_COMPLETED
                )
            )
        return pending

    def _cancel(self, loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task[Any]]) -> None:
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_WAIT_S))

    def _cancel_all(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        if pending:
            self._cancel(loop, pending)

    def close(self) -> None:
        """Cancel what is left on the loop, wait a little for sync steps' threads, close it."""
        loop, self.loop = self.loop, None
        if loop is None:
            return
        try:
            self._cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            executor = loop.shutdown_default_executor()
            loop.run_until_complete(
                asyncio.wait([loop.create_task(executor)], timeout=CLOSE_WAIT_S)
            )
        finally:
            loop.close()

    # -- the task factory: an asyncio task of a turn journals in a child context ------------------

    def _task(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        **options: Any,
    ) -> asyncio.Task[Any]:
        context: contextvars.Context | None = options.get("context")
        parent = (context or contextvars.copy_context()).get(active_runner)
        turn = self.turn
        if (
            turn is None
            or not isinstance(parent, ContextRunner)
            or parent.state.scope.record is not turn.record
            or parent.state.active_key is not None  # a live step's own work: not journaled
            or _asyncio_own(coro)
        ):
            return asyncio.Task(coro, loop=loop, **options)
        context = context or contextvars.copy_context()
        try:
            child, entry_of = _spawn(parent, _label(coro))
        except (ControlFlow, ContinuumError) as exc:
            # Raised where the task runs, not in the caller's gather (its other coroutines
            # would be left never awaited).
            return asyncio.Task(_refused(coro, exc), loop=loop, **{**options, "context": context})
        context.run(active_runner.set, child)
        body = _journaled(parent, child, coro, entry_of, turn.endings)
        task = asyncio.Task(body, loop=loop, **{**options, "context": context})
        turn.runners[task] = child
        turn.endings.started(entry_of)
        return task


def never_awaited(root: ContextRunner, turn: AsyncTurn) -> None:
    """Fail the turn that returned if an async step called in it, by its own code or an
    asyncio task's, was never awaited (nor handed to a task): it never ran."""
    for runner in (root, *turn.runners.values()):
        made, runner.unawaited = runner.unawaited, []
        for call, name in made:
            if inspect.getcoroutinestate(call) == inspect.CORO_CREATED:
                call.close()
                raise Abort(
                    error_info(
                        ContinuumError(
                            f"step {name!r} was called without await, so it never ran",
                            task_id=runner.task_id,
                            step=name,
                            hint=f"await it: `await {name}(...)`, or hand it to "
                            "asyncio.create_task or asyncio.gather and await those",
                        ),
                        runner.state.scope.record.turn,
                    )
                )


def _spawn(parent: ContextRunner, label: str) -> tuple[ContextRunner, JournalEntry]:
    """The child context of an asyncio task that ``parent`` makes now, and its entry."""
    state = parent.state
    with state.scope.lock:
        key, entry, done = enter(state, label, EntryKind.CONTEXT, boundary=False)
        if done:
            raise NonDeterminismError(
                f"turn {state.scope.record.turn} started an asyncio task {label!r} where the "
                f"journal recorded a finished child context {key!r}",
                task_id=state.scope.record.task_id,
                step=key,
                hint="code between steps must be deterministic",
            )
    assert entry.children is not None
    return parent.child(entry.children, f"{state.path}{key}/"), entry


async def _journaled(
    parent: ContextRunner,
    child: ContextRunner,
    coro: Coroutine[Any, Any, Any],
    entry: JournalEntry,
    endings: EndingOrder,
) -> Any:
    """An asyncio task's coroutine in its child context: checked as a block's code is, and
    ended in the order it ended in live."""
    failure: ErrorInfo | None = None
    ended = False  # a control-flow exception is no ending: the task goes on in a later invocation
    try:
        value = await child.run_awaited(coro, task_body=True)
        ended = True
        await endings.ended(entry, child.state)
        return value
    except ControlFlow as signal:
        # Told to the parent, so that code catching it there (gather's return_exceptions)
        # still ends the turn as the signal would have; once a cancel was delivered, a wait
        # or a suspension of another task no longer stops the cleanup (as in a batch).
        if parent.state.unwinding is None and not (
            isinstance(signal, Suspend | Wait) and _cancel_delivered(parent.state.scope.record)
        ):
            parent.state.unwinding = signal
        raise
    except Exception as exc:
        failure, ended = ErrorInfo(type=type_of(exc), message=str(exc)[:2000]), True
        await endings.ended(entry, child.state)
        raise
    finally:
        endings.drop(entry)
        parent.state.progress = parent.state.progress or child.state.progress
        # Its entry stays open, so every invocation runs it again: only the one where it
        # really ended (something ran live in it, or it began here) tells of its end.
        if ended and (child.state.progress or reached_here(parent.state, entry)):
            context_ended(parent.state, "context", entry, child.state.path, failure)


def _log_unawaited_errors(runner: ContextRunner, outcomes: list[BaseException | None]) -> None:
    """Warn of the errors of asyncio tasks the function left running: the task returned, and
    its outcome stands (a step's failure is in the journal and the history)."""
    for exc in outcomes:
        if exc is not None and not isinstance(exc, ControlFlow):
            logger.warning(
                f"task {runner.task_id}: an asyncio task it left running failed after it "
                f"returned, and nothing awaited it: {type(exc).__name__}: {exc}",
                extra={"task_id": runner.task_id},
            )


def _cancel_delivered(record: TaskRecord) -> bool:
    """Whether the turn raised TaskCancelledError into the task's code already."""
    return record.cancel is not None and record.cancel.delivered


def _asyncio_own(coro: Coroutine[Any, Any, Any]) -> bool:
    """Whether ``coro`` is asyncio's own (``Event.wait``, ``Queue.get``): it runs no task code,
    and libraries make such tasks as their timing goes (pydantic-ai, one per wakeup of a wait)."""
    code = getattr(coro, "cr_code", None)
    return code is not None and code.co_filename.startswith(_ASYNCIO_DIR)


async def _refused(coro: Coroutine[Any, Any, Any], exc: BaseException) -> Any:
    coro.close()
    raise exc


def _label(coro: Coroutine[Any, Any, Any]) -> str:
    """An asyncio task's name in its key: its coroutine's (a step's coroutine has its step's)."""
    name = str(getattr(coro, "__qualname__", None) or getattr(coro, "__name__", "task"))
    return name.rsplit(".", 1)[-1]


def _outcome_error(task: asyncio.Future[Any]) -> BaseException | None:
    """What ended ``task`` (a group's control-flow exception, taken out of it), or None."""
    if task.cancelled():
        return None
    return _unwrapped(task.exception())


def _unwrapped(exc: BaseException | None) -> BaseException | None:
    """A (Base)ExceptionGroup of a TaskGroup or anyio: the control-flow exception in it that
    matters most (a fence, an abort, a suspension; waits merged into one), else the group."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    raised: list[ControlFlow] = []
    _control_flow_in(exc, raised)
    for kind in (Fenced, Abort, Suspend):
        for unwinding in raised:
            if isinstance(unwinding, kind):
                return unwinding
    waits = [unwinding for unwinding in raised if isinstance(unwinding, Wait)]
    if waits:
        if len(waits) == 1:
            return waits[0]
        return Wait([w for wait in waits for w in wait.waiters], waits[0].reason)
    return exc


def _merged(wait: Wait, outcomes: list[BaseException | None]) -> Wait:
    """``wait`` with the waiters of the other waits in ``outcomes`` (each waiter once)."""
    waiters = list(wait.waiters)
    seen = {id(waiter) for waiter in waiters}
    for outcome in outcomes:
        if isinstance(outcome, Wait):
            for waiter in outcome.waiters:
                if id(waiter) not in seen:
                    seen.add(id(waiter))
                    waiters.append(waiter)
    if len(waiters) == len(wait.waiters):
        return wait
    return Wait(waiters, wait.reason)


def _control_flow_in(group: BaseExceptionGroup[Any], into: list[ControlFlow]) -> None:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            _control_flow_in(exc, into)
        elif isinstance(exc, ControlFlow):
            into.append(exc)


def _fatal(error: BaseException | None) -> bool:
    """Neither an error of the task's code nor continuum's own signal (a worker's death, as
    tests play it): nothing else of the turn may run."""
    return error is not None and not isinstance(error, Exception | ControlFlow)


def _reason(error: BaseException) -> str:
    if isinstance(error, Suspend | Wait):
        return error.reason
    return f"the task function raised {type(error).__name__}"
