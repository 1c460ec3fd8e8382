"""Cancel: the task sees TaskCancelledError at its next boundary, may clean up, ends cancelled.

The tests whose task runs when the cancel comes run in both flavours
(``tests/waits/flavours.py``): the task ``def``, and ``async def`` awaiting its steps, sleep and
cleanup. Cancelling a finished task, a client's refusal, runs with the sync task.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskCancelledError, TaskContext, TaskFinishedError
from tests.waits.flavours import Flavour


class Chore(BaseModel):
    sleep_days: float = 30.0
    steps: int = 3
    swallow: bool = False


def cancellable_app(
    flavour: Flavour = Flavour("sync"), **options: object
) -> tuple[Continuum, list[str]]:
    app = Continuum(**options)  # type: ignore[arg-type]
    ran: list[str] = []

    @flavour.step(app)
    def work(i: int) -> int:
        ran.append(f"work {i}")
        return i

    @flavour.step(app)
    def clean_up() -> str:
        ran.append("clean up")
        return "cleaned"

    def chore(ctx: TaskContext[Chore]) -> str:
        try:
            for i in range(ctx.state.steps):
                work(i)
            ctx.sleep(timedelta(days=ctx.state.sleep_days))
            work(99)
        except TaskCancelledError:
            clean_up()
            if not ctx.state.swallow:
                raise
        return "finished anyway"

    async def chore_async(ctx: TaskContext[Chore]) -> str:
        try:
            for i in range(ctx.state.steps):
                await work(i)
            await ctx.sleep_async(timedelta(days=ctx.state.sleep_days))
            await work(99)
        except TaskCancelledError:
            await clean_up()
            if not ctx.state.swallow:
                raise
        return "finished anyway"

    flavour.task(app, chore, chore_async, state=Chore)
    return app, ran


def test_cancelling_a_task_asleep_for_thirty_days_takes_effect_at_once(make_runtime, flavour):
    app, ran = cancellable_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("chore", {})
        runtime.invoke_once()
        assert runtime.record(task_id).status == Status.WAITING
        for _ in range(4):  # an hour of hops
            runtime.time.advance(900)
            runtime.invoke_once()
        hops = runtime.record(task_id).counters.hops
        assert hops == 4
        client.cancel(task_id, "not needed any more")
        client.cancel(task_id, "second reason")  # a no-op: the first reason wins
        done = runtime.drive(task_id)
    record = runtime.record(done.task_id)
    assert done.status == "cancelled"
    assert record.error.type == "TaskCancelledError"
    assert "not needed any more" in record.error.message
    assert record.counters.hops <= hops + 1  # within one hop, not at the end of the sleep
    assert ran == ["work 0", "work 1", "work 2", "clean up"]  # the cleanup once


def test_a_pending_task_cancelled_before_it_ran_ends_cancelled(make_runtime, flavour):
    app, ran = cancellable_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("chore", {})
        client.cancel(task_id)
        done = runtime.drive(task_id)
    assert done.status == "cancelled"
    assert ran == ["clean up"]  # its first step was the boundary


def test_a_running_task_sees_the_cancel_within_the_inbox_poll_interval(make_runtime, flavour):
    app = Continuum(inbox_poll_s=5.0)
    ran: list[int] = []
    runtime = make_runtime(app, budget_s=900)

    @flavour.step(app)
    def slow(i: int) -> int:
        ran.append(i)
        if i == 2:
            app.client().cancel(task_id, "from inside")
        runtime.time.advance(3)  # each step takes three (virtual) seconds
        return i

    def busy(ctx: TaskContext[Chore]) -> str:
        for i in range(20):
            slow(i)
        return "done"

    async def busy_async(ctx: TaskContext[Chore]) -> str:
        for i in range(20):
            await slow(i)
        return "done"

    flavour.task(app, busy, busy_async, state=Chore)

    with runtime.time.running():
        task_id = app.client().start("busy", {})
        done = runtime.drive(task_id)
    assert done.status == "cancelled"
    assert 3 <= len(ran) <= 5  # seen at a boundary within 5 s of the request
    assert done.invocations == 1


def test_a_suspended_task_is_cancelled_when_its_continuation_or_the_wake_comes(
    make_runtime, flavour
):
    app, ran = cancellable_app(flavour, default_step_s=0.05, safety_margin_s=0.05)

    runtime = make_runtime(app, budget_s=0.0001)  # every step suspends first
    client = app.client()
    with runtime.time.running():
        task_id = client.start("chore", {"steps": 5})
        while runtime.record(task_id).status != Status.SUSPENDED:
            runtime.invoke_once()
        client.cancel(task_id, "suspended")
        done = runtime.drive(task_id)
    assert done.status == "cancelled"
    assert ran.count("clean up") == 1


def test_a_task_that_swallows_the_cancel_still_ends_cancelled(make_runtime, flavour):
    app, ran = cancellable_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("chore", {"swallow": True, "sleep_days": 0.05})
        assert waiting.status == "succeeded"  # not cancelled: shows the run ends by itself
        task_id = app.client().start("chore", {"swallow": True})
        runtime.invoke_once()
        app.client().cancel(task_id)
        waiting = runtime.record(task_id)
        done = runtime.drive(waiting.task_id)
    assert done.status == "cancelled"
    assert done.result is None
    assert ran.count("clean up") == 1


def test_cancelling_a_finished_task_is_a_clear_error_and_changes_nothing(make_runtime):
    app, _ = cancellable_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        done = runtime.run("chore", {"sleep_days": 0, "steps": 1})
        assert done.status == "succeeded"
        objects = runtime.observer_store.list_keys(f"tasks/{done.task_id}/")
        before = {key: runtime.observer_store.get(key).etag for key in objects}
        with pytest.raises(TaskFinishedError, match="cannot cancel a task that is succeeded"):
            app.client().cancel(done.task_id)
        objects = runtime.observer_store.list_keys(f"tasks/{done.task_id}/")
        after = {key: runtime.observer_store.get(key).etag for key in objects}
    assert before == after


def test_a_cleanup_that_spans_a_suspension_runs_each_step_once(make_runtime, flavour):
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)
    ran: list[str] = []

    @flavour.step(app)
    def undo(i: int) -> int:
        ran.append(f"undo {i}")
        time.sleep(0.05)
        return i

    def careful(ctx: TaskContext[Chore]) -> None:
        try:
            ctx.sleep(3600)
        except TaskCancelledError:
            for i in range(10):
                undo(i)
            raise

    async def careful_async(ctx: TaskContext[Chore]) -> None:
        try:
            await ctx.sleep_async(3600)
        except TaskCancelledError:
            for i in range(10):
                await undo(i)
            raise

    flavour.task(app, careful, careful_async, state=Chore)

    runtime = make_runtime(app, budget_s=0.3)
    with runtime.time.running():
        task_id = app.client().start("careful", {})
        runtime.invoke_once()
        app.client().cancel(task_id)
        done = runtime.drive(task_id)
    assert done.status == "cancelled"
    assert ran == [f"undo {i}" for i in range(10)]
    assert done.continuations >= 1  # the cleanup did not fit in one invocation
