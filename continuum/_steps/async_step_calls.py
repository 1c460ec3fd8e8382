"""Step calls awaited inside an async task: the sync step calls' replay and record, with the
attempts awaited on the invocation's event loop.

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
from typing import Any, NamedTuple

from continuum._base.clock import now_s
from continuum._base.json_values import from_json
from continuum._define.steps import AsyncStep, Step
from continuum._record.model import JournalEntry, StepStats
from continuum._steps.attempt_endings import (
    interrupted,
    paused,
    preempted,
    raised,
    retry_wait,
    step_error,
    unmark,
)
from continuum._steps.signals import Paused, Preempted
from continuum._steps.step_calls import StepCaller
from continuum._steps.turn_state import TurnState
from continuum.errors import ContinuumError


class Replayed(NamedTuple):
    """A step call the journal answered: the value it returns."""

    value: Any


class LiveCall(NamedTuple):
    """A step call to run live: the step (a test helper's, if it wraps it), its key, the
    journal's unfinished entry of it (a paused step, a retry), and now."""

    step: Step[Any, Any]
    key: str
    resume: JournalEntry | None
    wall: float


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
        with state.lock:
            opened = self._open(step, key)
        if isinstance(opened, Replayed):
            return opened.value
        serial = state.serial
        if serial is None:
            return await self._run_live(*opened, args, kwargs)
        async with serial:  # in recovery every step start is saved: one at a time
            return await self._run_live(*opened, args, kwargs)

    def _open(self, step: Step[Any, Any], key: str | None) -> Replayed | LiveCall:
        """Take the call's key: its recorded outcome (raised, if the step failed), or what a
        live run of it needs: what ``StepCaller.call`` does before it runs a step live.
        Called with the lock held."""
        state = self.state
        journal = state.journal
        replaying = journal.position < len(journal.entries)
        if replaying:
            state.replay_cancel()
        name = step.options.name
        key = journal.key_for(name, key, state.path)
        entry = journal.replay(name, key) if replaying else None
        if entry is not None and not entry.partial:
            state.record.counters.steps_replayed += 1
            if not entry.ok:
                raise step_error(state, entry.error, key)
            return Replayed(from_json(step.adapter, entry.result))
        if state.halt is not None:  # a branch of a batch, or an asyncio task of a turn
            state.halt_check()
        wall = now_s()
        # boundary()'s own test first: on every step's path, its call showed.
        due = wall - state.inbox.listed_at >= state.inbox_poll_s
        if due or state.record.cancel is not None:
            wall = state.boundary(reopen=entry is not None)
        if state.step_wrapper is not None:
            step = state.step_wrapper(step, state)
        return LiveCall(step, key, entry, wall)

    async def _run_live(
        self,
        step: Step[Any, Any],
        key: str,
        resume: JournalEntry | None,
        wall: float,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run the step's attempts until one returns, and record its value (as
        ``StepCaller._run_live``, awaiting each attempt and each backoff)."""
        steps, state, options = self.steps, self.state, step.options
        stats = steps.stats(options.name)
        attempt, cursor, pending = 0, None, None
        if resume is not None:
            attempt, cursor, pending = await self._resume(step, key, stats, resume)
            wall = now_s()
        first = wall if resume is None or resume.since is None else resume.since
        while True:
            attempt += 1
            steps.check_budget(options.name, stats, preemptible=options.preemptible)
            if pending is not None or state.record.recovering or options.at_most_once:
                pending, wall = steps.begin(step, key, attempt, pending, wall)
            if state.observers is not None:
                state.step_started(
                    key, options.name, attempt, wall, replay=resume is not None, first=first
                )
            record = state.record
            state.active_key = f"{record.task_id}/{record.turn}/{state.path}{key}"
            state.active_cursor = cursor
            started = state.clock()
            whole = _ToItsEnd() if options.at_most_once else None
            inside = _IN_STEP.set(state)
            self.live = True
            try:
                call = self._attempt(step, args, kwargs)
                value = await (call if whole is None else whole.run(call))
            except Preempted:
                took = round(state.clock() - started, 6)
                state.log_step(key, wall, took, attempt, "preempted", name=step.name)
                raise preempted(state, key, stats, started) from None
            except Paused as pause:
                unmark(state, pending)
                raise paused(
                    state, step, key, stats, started, attempt, wall, pause.cursor, since=first
                ) from None
            except Exception as exc:
                unmark(state, pending)
                pending = raised(
                    state,
                    step,
                    key,
                    stats,
                    started,
                    attempt,
                    wall,
                    exc,
                    since=first,
                    in_place=False,
                )
                if whole is not None and whole.cancelled:
                    raise asyncio.CancelledError from None  # recorded: its retry comes later
                await _backoff(retry_wait(state, key, stats, pending))
                wall = now_s()
                continue
            finally:
                self.live = False
                _IN_STEP.reset(inside)
                state.active_key = None
                state.active_cursor = None
                if record.running_step is not None:
                    record.running_step = None
            with state.lock:
                value = steps.record_value(
                    step, key, value, stats, started, attempt, wall, pending, first
                )
            if whole is not None and whole.cancelled:
                raise asyncio.CancelledError
            return value

    async def _attempt(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """One attempt: the step's value (an awaitable it returns is awaited too)."""
        fn, state = step.fn, self.state
        coroutine = isinstance(step, AsyncStep)
        if step.options.preemptible:
            limit = state.budget.preempt_after(state.record.save_stats)
            if not coroutine:
                value = state.preemptor(lambda: fn(*args, **kwargs), limit)
            else:
                deadline = asyncio.timeout(max(limit, 0.0))
                try:
                    async with deadline:
                        value = await fn(*args, **kwargs)
                except TimeoutError:
                    if deadline.expired():
                        raise Preempted from None
                    raise
        elif coroutine:
            value = await fn(*args, **kwargs)
        else:
            value = await asyncio.to_thread(fn, *args, **kwargs)
        if inspect.isawaitable(value):  # a sync callable that returned a coroutine
            value = await value
        return value

    async def _resume(
        self, step: Step[Any, Any], key: str, stats: StepStats, resume: JournalEntry
    ) -> tuple[int, Any, JournalEntry | None]:
        """Where an unfinished step goes on (as ``StepCaller.resume``, awaiting a backoff)."""
        state = self.state
        if resume.started:
            retry = interrupted(state, step, key, stats, resume, in_place=False)
            await _backoff(retry_wait(state, key, stats, retry))
            return resume.attempts, None, retry
        if resume.retry_at is not None:
            await _backoff(retry_wait(state, key, stats, resume))
            return resume.attempts, None, resume
        return resume.attempts - 1, resume.cursor, resume


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


async def _backoff(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)


def _side_by_side(state: TurnState, step: Step[Any, Any]) -> ContinuumError:
    """The error for a step awaited beside another of the same journal: only an async task's
    asyncio tasks journal apart (a sync task's asyncio.gather inside asyncio.run does not)."""
    running = state.active_key.rsplit("/", 1)[-1] if state.active_key else "?"
    return ContinuumError(
        f"step {step.options.name!r} was awaited while step {running!r} runs, side by side in "
        "one journal (asyncio.gather or asyncio tasks inside asyncio.run in a sync task): it "
        "would run outside the journal",
        task_id=state.record.task_id,
        step=step.options.name,
        hint="make the task async def and await the steps there: each asyncio task of an "
        "async task journals apart",
    )
