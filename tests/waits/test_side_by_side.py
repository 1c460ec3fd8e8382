"""Waits side by side in one turn (``ctx.parallel`` in a sync task, ``asyncio.gather`` in an
async one): the task waits for all of them at once, each keeps its own deadline, a callback
the task made is awaited in the branch that asks for its result, and a cancel delivered to one
of them lets the task's cleanup run.

Every test runs in both flavours (``tests/waits/flavours.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from continuum import CallbackTimeoutError, Continuum, TaskCancelledError, TaskContext
from tests.waits.flavours import Flavour


class Timeouts(BaseModel):
    a: float | None = None
    b: float | None = 60.0


def two_mailboxes_app(flavour: Flavour) -> tuple[Continuum, list[Any]]:
    """Task ``both``: waits for signals ``a`` and ``b`` side by side, each with its timeout."""
    app = Continuum()
    handled: list[Any] = []

    @flavour.step(app)
    def handle(name: str, payload: Any) -> Any:
        handled.append((name, payload))
        return payload

    def both(ctx: TaskContext[Timeouts]) -> list[Any]:
        def one(c: TaskContext[Timeouts], name: str) -> Any:
            signal = c.wait_for_signal(name, timeout=getattr(c.state, name))
            return handle(name, signal.payload if signal else None)

        return ctx.parallel([lambda c: one(c, "a"), lambda c: one(c, "b")]).values()

    async def both_async(ctx: TaskContext[Timeouts]) -> list[Any]:
        async def one(name: str) -> Any:
            signal = await ctx.wait_for_signal_async(name, timeout=getattr(ctx.state, name))
            return await handle(name, signal.payload if signal else None)

        return list(await asyncio.gather(one("a"), one("b")))

    flavour.task(app, both, both_async, state=Timeouts)
    return app, handled


def test_a_task_waits_for_every_wait_side_by_side_at_once(make_runtime, flavour):
    app, handled = two_mailboxes_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("both", {"a": 3600, "b": 3600})
        assert waiting.status == "waiting", waiting.error
        assert sorted(w.name for w in client.status(waiting.task_id).waiting_for) == ["a", "b"]
        client.signal(waiting.task_id, "b", "for b")
        assert runtime.drive(waiting.task_id).status == "waiting"
        assert [w.name for w in client.status(waiting.task_id).waiting_for] == ["a"]
        client.signal(waiting.task_id, "a", "for a")
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded", done.error
    assert done.result == ["for a", "for b"]
    assert sorted(handled) == [("a", "for a"), ("b", "for b")]  # each once


def test_a_wait_side_by_side_with_one_without_a_timeout_still_times_out(make_runtime, flavour):
    app, handled = two_mailboxes_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("both", {"a": None, "b": 60})
        assert waiting.status == "waiting", waiting.error
        # b's timeout wakes the task, though a has none: b is handled, a still waited for.
        assert runtime.drive(waiting.task_id, stop_when_waiting=False).status == "waiting"
        assert handled == [("b", None)]
        client.signal(waiting.task_id, "a", "at last")
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded", done.error
    assert done.result == ["at last", None]


def two_approvals_app(flavour: Flavour) -> tuple[Continuum, list[str]]:
    """Task ``approvals``: makes two callbacks (the first times out in ten minutes), hands
    them out, then awaits their results side by side."""
    app = Continuum()
    ids: list[str] = []

    @flavour.step(app)
    def hand_out(callback_id: str) -> None:
        ids.append(callback_id)

    def outcome(callback: Any) -> Any:
        try:
            return callback.result()
        except CallbackTimeoutError:
            return "timed out"

    def approvals(ctx: TaskContext[Timeouts]) -> list[Any]:
        first = ctx.create_callback("first", timeout=600)
        second = ctx.create_callback("second", timeout=6000)
        hand_out(first.id)
        hand_out(second.id)
        return ctx.parallel([lambda c: outcome(first), lambda c: outcome(second)]).values()

    async def approvals_async(ctx: TaskContext[Timeouts]) -> list[Any]:
        first = ctx.create_callback("first", timeout=600)
        second = ctx.create_callback("second", timeout=6000)
        await hand_out(first.id)
        await hand_out(second.id)

        async def awaited(callback: Any) -> Any:
            return outcome(callback)

        return list(await asyncio.gather(awaited(first), awaited(second)))

    flavour.task(app, approvals, approvals_async, state=Timeouts)
    return app, ids


def test_callbacks_awaited_side_by_side_each_take_their_own_outcome(make_runtime, flavour):
    app, ids = two_approvals_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("approvals", {})
        assert waiting.status == "waiting", waiting.error
        assert sorted(w.name for w in client.status(waiting.task_id).waiting_for) == [
            "first",
            "second",
        ]
        client.complete_callback(ids[1], "yes")  # the second answered; the first times out
        done = runtime.drive(waiting.task_id, stop_when_waiting=False)
    assert done.status == "succeeded", runtime.record(done.task_id).error
    assert done.result == ["timed out", "yes"]


def test_a_cancel_while_waits_side_by_side_runs_the_cleanup_once(make_runtime, flavour):
    app, _ = two_mailboxes_app(flavour)
    cleaned: list[str] = []

    @flavour.step(app)
    def clean_up() -> None:
        cleaned.append("clean up")

    def guarded(ctx: TaskContext[Timeouts]) -> Any:
        try:
            return ctx.parallel(
                [lambda c: c.wait_for_signal("a"), lambda c: c.wait_for_signal("b")]
            ).values()
        except TaskCancelledError:
            clean_up()
            raise

    async def guarded_async(ctx: TaskContext[Timeouts]) -> Any:
        try:
            return await asyncio.gather(
                ctx.wait_for_signal_async("a"), ctx.wait_for_signal_async("b")
            )
        except TaskCancelledError:
            await clean_up()
            raise

    flavour.task(app, guarded, guarded_async, state=Timeouts)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("guarded", {})
        assert waiting.status == "waiting", waiting.error
        client.cancel(waiting.task_id, "stop")
        done = runtime.drive(waiting.task_id)
    assert done.status == "cancelled", done.error
    assert cleaned == ["clean up"]
