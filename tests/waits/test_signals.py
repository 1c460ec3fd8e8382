"""Signals: a mailbox per task; each wait takes the oldest of its name, once, journaled.

The tests whose task waits run in both flavours (``tests/waits/flavours.py``): the task ``def``,
and ``async def`` with ``await ctx.wait_for_signal_async`` and awaited steps. The client's
refusals (a missing or finished task, bad names) run with the sync task.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import (
    Continuum,
    ContinuumError,
    RecordNotFoundError,
    TaskContext,
    TaskFinishedError,
)
from tests.waits.flavours import Flavour


class Inbox(BaseModel):
    wants: int = 2
    timeout_s: float | None = None
    taken: list[Any] = []


def mailbox_app(flavour: Flavour = Flavour("sync")) -> tuple[Continuum, list[Any]]:
    app = Continuum()
    handled: list[Any] = []

    @flavour.step(app)
    def handle(payload: Any) -> Any:
        handled.append(payload)
        return payload

    def listen(ctx: TaskContext[Inbox]) -> list[Any] | None:
        signal = ctx.wait_for_signal("order", timeout=ctx.state.timeout_s)
        ctx.state.taken.append(handle(signal.payload) if signal else None)
        return ctx.state.taken if len(ctx.state.taken) >= ctx.state.wants else None

    async def listen_async(ctx: TaskContext[Inbox]) -> list[Any] | None:
        signal = await ctx.wait_for_signal_async("order", timeout=ctx.state.timeout_s)
        ctx.state.taken.append(await handle(signal.payload) if signal else None)
        return ctx.state.taken if len(ctx.state.taken) >= ctx.state.wants else None

    flavour.task(app, listen, listen_async, state=Inbox)
    return app, handled


def test_signals_sent_before_the_wait_are_kept_and_taken_oldest_first(make_runtime, flavour):
    app, handled = mailbox_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("listen", {"wants": 3})
        for n in range(3):
            client.signal(task_id, "order", {"n": n})
            runtime.time.advance(1)
        done = runtime.drive(task_id)
    assert done.status == "succeeded"
    assert done.result == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert handled == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert runtime.record(task_id).counters.waits == 0  # each was there when it was wanted


def test_a_waiting_task_is_woken_by_a_signal_and_a_signal_of_another_name_is_left(
    make_runtime, flavour
):
    app, _ = mailbox_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("listen", {"wants": 1})
        assert waiting.status == "waiting"
        client.signal(waiting.task_id, "other", "not for this wait")
        assert runtime.drive(waiting.task_id).status == "waiting"  # woken, and ignored
        claims = runtime.record(waiting.task_id).counters.invocations
        client.signal(waiting.task_id, "order", "for it")
        done = runtime.drive(waiting.task_id)
    assert done.result == ["for it"]
    assert done.invocations == claims + 1  # the ignored wake claimed nothing


def test_a_repeated_signal_id_is_delivered_once(make_runtime, flavour):
    app, handled = mailbox_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("listen", {"wants": 2, "timeout_s": 60})
        assert client.signal(task_id, "order", "a", signal_id="order-1") == "order-1"
        assert client.signal(task_id, "order", "a again", signal_id="order-1") == "order-1"
        done = runtime.drive(task_id, stop_when_waiting=False)
    assert done.result == ["a", None]  # the second wait timed out: no second delivery
    assert handled == ["a"]


def test_a_wait_that_times_out_returns_none(make_runtime, flavour):
    app, _ = mailbox_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("listen", {"wants": 1, "timeout_s": 3600})
        done = runtime.drive(waiting.task_id, stop_when_waiting=False)
    assert done.result == [None]


def test_a_replayed_turn_takes_the_same_signal_and_the_next_wait_the_next_one(
    make_runtime, flavour
):
    app = Continuum()
    handled: list[str] = []

    @flavour.step(app)
    def handle(payload: str) -> str:
        handled.append(payload)
        return payload

    def two_in_one_turn(ctx: TaskContext[Inbox]) -> list[str]:
        first = ctx.wait_for_signal("order")
        a = handle(first.payload)
        second = ctx.wait_for_signal("order")  # the turn waits here, then replays `first`
        return [a, handle(second.payload)]

    async def two_in_one_turn_async(ctx: TaskContext[Inbox]) -> list[str]:
        first = await ctx.wait_for_signal_async("order")
        a = await handle(first.payload)
        second = await ctx.wait_for_signal_async("order")
        return [a, await handle(second.payload)]

    flavour.task(app, two_in_one_turn, two_in_one_turn_async, state=Inbox)

    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("two_in_one_turn", {})
        client.signal(task_id, "order", "one")
        assert runtime.drive(task_id).status == "waiting"
        client.signal(task_id, "order", "two")
        done = runtime.drive(task_id)
    assert done.result == ["one", "two"]
    assert handled == ["one", "two"]
    assert runtime.record(task_id).signals_taken == [
        k for k in runtime.record(task_id).signals_taken if k.startswith("signals/order/")
    ]


def test_signals_to_missing_or_finished_tasks_and_bad_names_are_refused(make_runtime):
    app, _ = mailbox_app()
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        with pytest.raises(RecordNotFoundError):
            client.signal("no-such-task", "order", 1)
        task_id = client.start("listen", {"wants": 1})
        for name in ("", "has space", "../up", "x" * 200):
            with pytest.raises(ContinuumError, match="signal name"):
                client.signal(task_id, name, 1)
        with pytest.raises(ContinuumError, match="signal id"):
            client.signal(task_id, "order", 1, signal_id="bad/id")
        client.signal(task_id, "order", "last")
        assert runtime.drive(task_id).status == "succeeded"
        with pytest.raises(TaskFinishedError, match="succeeded"):
            client.signal(task_id, "order", "too late")
