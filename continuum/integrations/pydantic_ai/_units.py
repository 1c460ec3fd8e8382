"""One durable unit of pydantic-ai (an async operation body) as one continuum step.

**In an async task** (``await agent.run(...)``) the agent runs on the invocation's event loop,
the loop the turn runs on, so a unit is an async step awaited right there
(:func:`run_unit_async`): the budget is checked before the body, the body is awaited and timed,
its result journaled, with no thread in between. pydantic-ai runs the tool calls a model asked
for together as asyncio tasks, made in the order of the model's response, and each asyncio task
of a turn journals in its own child context made where it was created: so each call's step has
a key by the response's order, whatever order the calls finish in.

**Under ``agent.run_sync``** (a sync task) the agent runs on a loop of its own, which
``run_sync`` drives on the task's thread, and the rest of this docstring applies.

A continuum step is a synchronous function that the turn loop calls *inside* ``call_step``:
the budget is checked before it, it is timed, and its result is journaled after it. A
pydantic-ai unit is a coroutine that must run on the agent's own event loop, which
``agent.run_sync`` drives on the task's thread (``loop.run_until_complete``): the loop-bound
clients of the model and the toolsets live there. A running loop cannot be re-entered, so the
two meet across one extra thread per invocation, the *journal thread*:

1. the unit's coroutine (on the agent loop) hands ``ctx.step(step, run_body)`` to the journal
   thread and awaits it; the loop is free meanwhile;
2. the journal thread runs the step call: a unit the journal recorded returns its result there
   and then; a live one passes the budget check and calls ``run_body``;
3. ``run_body`` schedules the unit's body back onto the agent loop and blocks until it ends, so
   the step is timed over exactly the body;
4. the outcome (the recorded JSON, a ``StepError``, or continuum's ``Suspend``/``Wait``) comes
   back to the awaiting coroutine and is returned or raised there.

The journal is written by one thread at a time, in the order units are reached: the journal
thread runs one step call after another (a single worker), and the agent is switched to run
tool calls one at a time. A unit abandoned by a cancelled run is cancelled on the loop, and the
coroutine waits for the journal thread to finish before it lets the cancellation go on, so no
step call outlives the run that made it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from continuum._define.steps import Runner, Step, StepOptions, make_step
from continuum._steps.control_flow import ControlFlow
from continuum._turn.context import TaskContext
from continuum._turn.event_loop import InvocationLoop

Body = Callable[[], Awaitable[object]]


def _run(work: Callable[[], Any]) -> Any:
    """The function of every unit's step: do the unit's work (its result is JSON already)."""
    return work()


async def _run_async(work: Body) -> Any:
    """The function of every unit's async step: await the unit's work (its result is JSON)."""
    return await work()


def unit_step(options: StepOptions, *, awaited: bool = False) -> Step[Any, Any]:
    """The step that journals a unit under ``options.name`` (its durable operation name):
    ``awaited``, an async step for :func:`run_unit_async`."""
    if awaited:
        return make_step(_run_async, options)
    return Step(fn=_run, options=options)


def on_turn_loop() -> bool:
    """Whether the running event loop is the one an async task's turn runs on (the agent was
    awaited in the task), not one of pydantic-ai's own (``run_sync``)."""
    factory = asyncio.get_running_loop().get_task_factory()
    return isinstance(getattr(factory, "__self__", None), InvocationLoop)


async def run_unit_async(runner: Runner, step: Step[Any, Any], body: Body) -> tuple[object, bool]:
    """Await ``body`` as the async step ``step`` of the running task, on the turn's own loop;
    return its JSON result and whether the body ran live (False: replayed from the journal)."""
    ran = False

    async def live() -> object:
        nonlocal ran
        ran = True
        return await body()

    return await runner.call_step_async(step, (live,), {}, None), ran


class _Invocation:
    """What the units of one task invocation share: the journal thread, one worker."""

    def __init__(self) -> None:
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="continuum-journal"
        )

    def __del__(self) -> None:
        self.executor.shutdown(wait=False)


#: The journal thread of each running turn loop; it goes with the loop (one per invocation).
_invocations: weakref.WeakKeyDictionary[Runner, _Invocation] = weakref.WeakKeyDictionary()
_invocations_lock = threading.Lock()


def _invocation(runner: Runner) -> _Invocation:
    with _invocations_lock:
        found = _invocations.get(runner)
        if found is None:
            found = _invocations[runner] = _Invocation()
        return found


class _Handoff:
    """One unit on its way through the journal thread and back to the agent loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, body: Body) -> None:
        self.loop = loop
        self.body = body
        self.context = contextvars.copy_context()
        self.task: asyncio.Task[object] | None = None
        self.abandoned = False
        #: the body ran live (False: the journal had the unit, or it never started).
        self.ran = False

    def run_body(self) -> object:
        """On the journal thread, inside the step call: run the body on the agent loop."""
        result: concurrent.futures.Future[object] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self._start, result)
        # BaseExceptions (cancellation, a worker's death) pass through the step call without
        # being journaled; an Exception is the unit's failure, journaled as the step's.
        return result.result()

    def _start(self, result: concurrent.futures.Future[object]) -> None:
        if self.abandoned:
            result.set_exception(asyncio.CancelledError())
            return
        self.ran = True
        self.task = self.loop.create_task(self.body(), context=self.context)  # type: ignore[arg-type]
        self.task.add_done_callback(lambda task: _forward(task, result))

    def abandon(self) -> None:
        """The awaiting coroutine was cancelled: cancel the body, or never start it."""
        self.abandoned = True
        if self.task is not None:
            self.task.cancel()


def _forward(task: asyncio.Task[object], result: concurrent.futures.Future[object]) -> None:
    if task.cancelled():
        result.set_exception(asyncio.CancelledError())
    elif (error := task.exception()) is not None:
        result.set_exception(error)
    else:
        result.set_result(task.result())


def _settle(done: asyncio.Future[object], outcome: tuple[bool, Any]) -> None:
    if done.done():  # pragma: no cover - only its own journal thread settles it
        return
    ok, value = outcome
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)


async def run_unit(
    ctx: TaskContext[Any], runner: Runner, step: Step[Any, Any], body: Body
) -> tuple[object, bool]:
    """Run ``body`` as the step ``step`` of the running task; return its JSON result and
    whether the body ran live (False: replayed from the journal)."""
    loop = asyncio.get_running_loop()
    handoff = _Handoff(loop, body)
    if _recorded(runner, step.name):
        # A unit the journal holds returns its recorded outcome without calling its function:
        # the step call can stay on this thread and skip the two thread switches a live unit
        # pays for (one journal writer at a time still holds: no live unit is in flight).
        return ctx.step(step, handoff.run_body), False
    done: asyncio.Future[object] = loop.create_future()

    def call() -> None:  # on the journal thread
        try:
            outcome: tuple[bool, Any] = (True, ctx.step(step, handoff.run_body))
        except BaseException as exc:
            outcome = (False, exc)
        loop.call_soon_threadsafe(_settle, done, outcome)

    _invocation(runner).executor.submit(call)
    try:
        return await asyncio.shield(done), handoff.ran
    except asyncio.CancelledError:
        if not done.done():
            handoff.abandon()
            await _finished(done)  # the step call ends before the run goes on unwinding
        error = done.exception()
        if isinstance(error, ControlFlow):
            raise error from None  # continuum's own unwinding wins over the cancellation
        raise


def _recorded(runner: Runner, name: str) -> bool:
    """Whether the journal holds the next step call's finished outcome under ``name``.

    The turn loop's journal is not part of the ``Runner`` protocol (a core change would make it
    so: ``Runner.recorded(name)``); without it every unit takes the journal thread.
    """
    journal = getattr(runner, "journal", None)
    entry = journal.peek() if journal is not None else None
    return entry is not None and entry.name == name and not entry.partial and entry.kind == "step"


async def _finished(done: asyncio.Future[object]) -> None:
    """Wait until ``done`` is settled, whatever it holds and however often we are cancelled."""
    while not done.done():
        with contextlib.suppress(BaseException):  # its outcome is read by the caller
            await asyncio.shield(done)
