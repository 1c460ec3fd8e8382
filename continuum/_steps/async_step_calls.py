"""Step calls awaited inside an async task: the sync step calls' set-up, attempts and record
(``step_calls``, ``attempts``), with each attempt and each backoff awaited on the invocation's
event loop.

What differs from a sync call (``step_calls``): an ``async def`` step is awaited; a sync one
runs in a thread (``asyncio.to_thread``) so the loop goes on meanwhile, unless it is
preemptible (it then runs in place under the alarm, as in a sync task); a preemptible async
step is cancelled at its limit (an asyncio timeout: what it did is discarded, and it runs again
in the next invocation); an at-most-once attempt runs to its end even when its asyncio task is
cancelled meanwhile; a retry's backoff is awaited, not slept. Concurrent calls come from
different asyncio tasks, and each asyncio task of a turn journals in its own child context
(``_turn.event_loop``), so a journal never has two calls in flight at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Coroutine
from typing import Any

from continuum._base import clock
from continuum._define.steps import AsyncStep, Step
from continuum._steps.attempts import Attempts, Sleep
from continuum._steps.control_flow import Preempted
from continuum._steps.step_calls import Replayed, StepCaller, run_preemptible
from continuum._steps.turn_state import TurnState
from continuum.errors import ContinuumError

#: The turn or child context whose awaited step the running code is part of: the step's own
#: coroutine and the asyncio tasks it makes (they copy the context), not its siblings.
_IN_STEP: contextvars.ContextVar[TurnState | None] = contextvars.ContextVar(
    "continuum_in_step", default=None
)


class AsyncStepCaller:
    """The awaited step calls of one turn or child context, beside its sync ones."""

    __slots__ = ("live", "state", "steps")

    def __init__(self, steps: StepCaller) -> None:
        self.steps = steps
        self.state: TurnState = steps.state
        #: whether one of this caller's steps runs now (awaited: the loop may run others).
        self.live = False

    async def call(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        """Call ``step`` and await it: its recorded outcome on replay, else run it live."""
        state = self.state
        if state.unwinding is not None:
            raise state.unwinding
        if state.active_key is not None:  # awaited inside a running step: part of its work
            if self.live and _IN_STEP.get() is not state:
                raise state.refuse(_side_by_side(state, step))
            if isinstance(step, AsyncStep):
                return await step.run_nested_async(args, kwargs)
            return step.run_nested(args, kwargs)
        with state.scope.lock:
            live = self.steps.open(step, key)
        if isinstance(live, Replayed):
            return live.value
        serial = state.serial
        if serial is None:
            return await self._drive(live, args, kwargs)
        async with serial:  # in recovery every step start is saved: one at a time
            return await self._drive(live, args, kwargs)

    async def _drive(self, live: Attempts, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Carry out a live call's attempts, awaiting each attempt and each backoff; the lock
        held only to record the value. An at-most-once attempt runs to its end though this
        asyncio task is cancelled meanwhile; the cancellation goes on once its outcome is
        journaled."""
        state = self.state
        whole: _ToItsEnd | None = None
        inside: contextvars.Token[TurnState | None] | None = None
        try:
            command = next(live)
            while True:
                if isinstance(command, Step):
                    whole = _ToItsEnd() if command.options.at_most_once else None
                    if inside is None:
                        inside = _IN_STEP.set(state)
                        self.live = True
                    try:
                        call = self._attempt(command, args, kwargs)
                        value = await (call if whole is None else whole.run(call))
                    except BaseException as exc:
                        command = live.throw(exc)
                    else:
                        break
                elif isinstance(command, Sleep):
                    try:
                        await clock.sleep_async(command.seconds)
                    except BaseException as exc:  # cancelled: through the attempts' finally
                        command = live.throw(exc)
                    else:
                        command = next(live)
                elif whole is not None and whole.cancelled:  # a retry: it comes later
                    command = live.throw(asyncio.CancelledError())
                else:
                    command = next(live)
        finally:
            if inside is not None:
                self.live = False
                _IN_STEP.reset(inside)
        with state.scope.lock:
            value = live.send(value)
        if whole is not None and whole.cancelled:
            raise asyncio.CancelledError
        return value

    async def _attempt(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """One attempt: the step's value (an awaitable it returns is awaited too)."""
        fn, state = step.fn, self.state
        coroutine = isinstance(step, AsyncStep)
        if step.options.preemptible and coroutine:
            limit = state.scope.budget.preempt_after(state.scope.record.save_stats)
            deadline = asyncio.timeout(max(limit, 0.0))
            try:
                async with deadline:
                    value = await fn(*args, **kwargs)
            except TimeoutError:
                if deadline.expired():
                    raise Preempted from None
                raise
        elif step.options.preemptible:
            value = run_preemptible(state, step, args, kwargs)
        elif coroutine:
            value = await fn(*args, **kwargs)
        else:
            value = await asyncio.to_thread(fn, *args, **kwargs)
        if inspect.isawaitable(value):  # a sync callable that returned a coroutine
            value = await value
        return value


class _ToItsEnd:
    """Runs an at-most-once step's attempt to its end though the asyncio task awaiting it is
    cancelled meanwhile (a task group whose other task waits or fails): cut short, it would
    keep its started marker, and the next turn would fail it as interrupted. ``cancelled``:
    the cancellation goes on once the attempt's outcome is recorded."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    async def run(self, call: Coroutine[Any, Any, Any]) -> Any:
        attempt = asyncio.ensure_future(call)
        while not attempt.done():
            try:
                await asyncio.wait([attempt])
            except asyncio.CancelledError:
                self.cancelled = True
        return attempt.result()


def _side_by_side(state: TurnState, step: Step[Any, Any]) -> ContinuumError:
    """The error for a step awaited beside another of the same journal: only an async task's
    asyncio tasks journal apart (a sync task's asyncio.gather inside asyncio.run does not)."""
    running = state.active_key.rsplit("/", 1)[-1] if state.active_key else "?"
    return ContinuumError(
        f"step {step.options.name!r} was awaited while step {running!r} runs, side by side in "
        "one journal (asyncio.gather or asyncio tasks inside asyncio.run in a sync task): it "
        "would run outside the journal",
        task_id=state.scope.record.task_id,
        step=step.options.name,
        hint="make the task async def and await the steps there: each asyncio task of an "
        "async task journals apart",
    )
