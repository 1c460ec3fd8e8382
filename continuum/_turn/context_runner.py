"""What a task's context talks to: a turn, or a child context of it, with its step calls and
waits.

A :class:`ContextRunner` holds one :class:`~continuum._steps.turn_state.TurnState`, the
:class:`~continuum._steps.step_calls.StepCaller` and
:class:`~continuum._waits.wait_calls.WaitCaller` on it, and the task context it serves. It is
the ``Runner`` that ``Step.__call__`` finds as the active runner, and the ``ParentRunner`` that
fan-out starts child contexts from: a child context (a block, a branch or an item of a batch)
gets a runner of its own from :meth:`ContextRunner.child`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from continuum._define.callbacks import Callback
from continuum._define.steps import Step, active_runner, running, stable_name
from continuum._record.model import JournalEntry
from continuum._record.waiting_for import Duration
from continuum._steps.control_flow import Abort, Suspend, Wait
from continuum._steps.failures import check_unwinding, error_info, located
from continuum._steps.journal import Journal
from continuum._steps.step_calls import StepCaller
from continuum._steps.turn_state import Halt, StepWrapper, TurnState
from continuum._waits.wait_calls import WaitCaller
from continuum.errors import ContinuumError

if TYPE_CHECKING:
    from continuum._fanout.child_tasks import ChildTasks
    from continuum._fanout.parent_runner import ServedContext
    from continuum._steps.async_step_calls import AsyncStepCaller


class ContextRunner:
    """A turn's or a child context's state, its step calls, its waits, and its context.

    Args:
        state: the turn's or child context's state.
        children: starts child tasks (given by the worker; None: none can start).
    """

    __slots__ = (
        "__weakref__",
        "async_steps",
        "call_step",
        "children",
        "ctx",
        "state",
        "steps",
        "thread_id",
        "unawaited",
        "virtual",
        "waits",
    )

    def __init__(self, state: TurnState, children: ChildTasks | None = None) -> None:
        self.state = state
        self.steps = StepCaller(state)
        self.waits = WaitCaller(state)
        self.children = children
        #: the task context it serves, set when the turn or block starts.
        self.ctx: ServedContext | None = None
        #: the thread that runs it (read on every step call: kept here, not looked up).
        self.thread_id = state.thread_id
        #: a step call (a slot, not a method: a test may put its own in front).
        self.call_step: Callable[
            [Step[Any, Any], tuple[Any, ...], dict[str, Any], str | None], Any
        ] = self.steps.call
        #: its awaited step calls, made on the first one (an async task's).
        self.async_steps: AsyncStepCaller | None = None
        #: async steps' coroutines made in a sync turn, and their steps' names.
        self.unawaited: list[tuple[Any, str]] = []
        #: a virtual child context's: it journals in its parent's journal, which goes on after it.
        self.virtual = False

    def child(
        self, entries: list[JournalEntry], path: str, halt: Halt | None = None
    ) -> ContextRunner:
        """The runner of a child context that journals in ``entries`` under ``path``, in the
        calling thread, serving the same task state."""
        child = ContextRunner(self.state.child(entries, path, halt), self.children)
        child.ctx = self.context.served_by(child)
        return child

    def virtual_child(self, path: str) -> ContextRunner:
        """The runner of a virtual child context: its steps journal in this runner's journal
        (no entry of its own), keyed under ``path``, in the calling thread."""
        state = self.state.child(self.state.journal.entries, path, None)
        state.journal = self.state.journal  # one cursor: the steps after it replay in order
        child = ContextRunner(state, self.children)
        child.ctx = self.context.served_by(child)
        child.virtual = True
        return child

    @property
    def context(self) -> ServedContext:
        assert self.ctx is not None, "the runner's turn or block has started"
        return self.ctx

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Run ``fn(ctx, *args)`` as this runner's code in this thread; check what it left."""
        state = self.state
        token = active_runner.set(self)
        ident = threading.get_ident()
        outer = running.get(ident)
        running[ident] = self
        try:
            try:
                value = fn(self.ctx, *args)
            except Exception as exc:
                located(exc, state.path)
                self._check_awaited()
                check_unwinding(state)
                raise
            self._check_awaited()
            check_unwinding(state)
            if inspect.iscoroutine(value):  # an async def where a sync function was expected
                value.close()
                raise ContinuumError(
                    f"{stable_name(fn)!r} returned a coroutine where a sync task, block or batch "
                    "wants a value (nothing awaits it here): in an async task use the _async "
                    "forms (child_context_async, map_async, parallel_async); in a sync task call "
                    "steps without await (ctx.step, not ctx.step_async)",
                    task_id=state.scope.record.task_id,
                )
            if not self.virtual:
                with state.scope.lock:
                    state.journal.check_complete()
            return value
        finally:
            active_runner.reset(token)
            if outer is None:
                running.pop(ident, None)
            else:
                running[ident] = outer

    async def run_awaited(self, call: Awaitable[Any], *, task_body: bool = False) -> Any:
        """Await ``call`` (an async function's coroutine over this runner's context) as this
        runner's code in the running asyncio task; check what it left, as :meth:`run` does.

        ``task_body``: ``call`` is the whole body of an asyncio task of the turn. A suspension
        or wait it caught may have been handed to another task (a task group that reports
        its tasks' errors through a stream), so one it left unwinding ends the turn as it
        would have; the task function and a block's code that swallow their own fail it.
        """
        state = self.state
        token = active_runner.set(self)
        try:
            try:
                value = await call
            except Exception as exc:
                located(exc, state.path)
                if self._unwound_elsewhere(task_body) is None:
                    check_unwinding(state)
                elif state.refused is not None:
                    raise Abort(error_info(state.refused, state.scope.record.turn)) from None
                # else: another asyncio task's suspension or wait beside this error (gather
                # raised what it saw first): the code swallowed nothing, and the error that it
                # let go ends the turn (a retry would replay the same error).
                raise
            signal = self._unwound_elsewhere(task_body)
            if signal is not None:
                # Another asyncio task's suspension or wait that the code let go by (gather
                # with return_exceptions): the turn still ends as it would have.
                raise signal
            check_unwinding(state)
            if not self.virtual:
                with state.scope.lock:
                    state.journal.check_complete()
            return value
        finally:
            active_runner.reset(token)

    def _unwound_elsewhere(self, task_body: bool) -> Suspend | Wait | None:
        """The suspension or wait unwinding this turn, if this code did not catch it itself:
        raised in another asyncio task, or caught in an asyncio task's whole body (a task
        group may hand it to another task to raise)."""
        state, signal = self.state, self.state.unwinding
        if isinstance(signal, Suspend | Wait) and (
            task_body or state.unwound_in is not asyncio.current_task()
        ):
            return signal
        return None

    # -- the Runner protocol (``_define.steps``) -------------------------------------------------

    @property
    def task_id(self) -> str:
        return self.state.scope.record.task_id

    @property
    def turn(self) -> int:
        return self.state.scope.record.turn

    @property
    def active_key(self) -> str | None:
        return self.state.active_key

    @property
    def active_cursor(self) -> Any:
        return self.state.active_cursor

    @property
    def journal(self) -> Journal:
        return self.state.journal

    @property
    def step_wrapper(self) -> StepWrapper | None:
        return self.state.scope.step_wrapper

    @step_wrapper.setter
    def step_wrapper(self, wrapper: StepWrapper | None) -> None:
        self.state.scope.step_wrapper = wrapper

    async def call_step_async(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        caller = self.async_steps
        if caller is None:
            from continuum._steps.async_step_calls import AsyncStepCaller

            caller = self.async_steps = AsyncStepCaller(self.steps)
        return await caller.call(step, args, kwargs, key)

    def remaining(self) -> float:
        return self.state.scope.budget.remaining()

    def created(self, call: Any, name: str) -> None:
        self.unawaited.append((call, name))

    def _check_awaited(self) -> None:
        """Refuse the turn if an async step's coroutine made in it never ran (nothing can
        await it in a sync turn); one given to ``asyncio.run`` is fine."""
        made, self.unawaited = self.unawaited, []
        for call, name in made:
            if inspect.getcoroutinestate(call) == inspect.CORO_CREATED:
                call.close()
                self.state.refuse(
                    ContinuumError(
                        f"step {name!r} is async def and a sync task called it without await, "
                        "so it never ran: make the task async def and await it",
                        task_id=self.state.scope.record.task_id,
                        step=name,
                    )
                )

    def refuse(self, error: ContinuumError) -> ContinuumError:
        return self.state.refuse(error)

    def sleep(self, duration: Duration, name: str | None) -> None:
        self.waits.sleep(duration, name)

    async def sleep_async(self, duration: Duration, name: str | None) -> None:
        await self.waits.sleep_async(duration, name)

    def create_callback(
        self, name: str | None, timeout: Duration | None, heartbeat: Duration | None, request: Any
    ) -> Callback:
        return self.waits.create_callback(name, timeout, heartbeat, request)

    def callback_result(self, callback: Callback) -> Any:
        return self.waits.result_here(callback)
