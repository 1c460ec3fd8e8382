"""Conditions: ``state = check(state)`` as a step, a durable sleep between checks, until
``done(state)``; each check runs once, and a cancel comes in at the next sleep or check.

Every test runs in both flavours (``tests/waits/flavours.py``): the task ``def`` with
``ctx.wait_for_condition``, and ``async def`` with ``await ctx.wait_for_condition_async`` and an
``async def`` check.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from continuum import ConditionNotMetError, Continuum, Status, TaskContext
from tests.waits.flavours import Flavour


class Poll(BaseModel):
    ready_at: int = 3
    max_attempts: int | None = None


def polling_app(flavour: Flavour) -> tuple[Continuum, list[int]]:
    """Task ``poll``: checks a job every hour until its count reaches ``ready_at``."""
    app = Continuum()
    checks: list[int] = []

    def progress(n: int) -> int:
        checks.append(n)
        return n + 1

    async def progress_async(n: int) -> int:
        return progress(n)

    def poll(ctx: TaskContext[Poll]) -> Any:
        try:
            return ctx.wait_for_condition(
                progress,
                initial=0,
                done=lambda n: n >= ctx.state.ready_at,
                delay_s=3600,
                max_attempts=ctx.state.max_attempts,
                name="job",
            )
        except ConditionNotMetError as exc:
            return f"gave up: {exc.message}"

    async def poll_async(ctx: TaskContext[Poll]) -> Any:
        try:
            return await ctx.wait_for_condition_async(
                progress_async,
                initial=0,
                done=lambda n: n >= ctx.state.ready_at,
                delay_s=3600,
                max_attempts=ctx.state.max_attempts,
                name="job",
            )
        except ConditionNotMetError as exc:
            return f"gave up: {exc.message}"

    flavour.task(app, poll, poll_async, state=Poll)
    return app, checks


def test_a_condition_is_checked_once_per_delay_until_it_holds(make_runtime, flavour):
    app, checks = polling_app(flavour)
    runtime = make_runtime(app)
    summary = runtime.run("poll", {"ready_at": 4})
    record = runtime.record(summary.task_id)
    assert summary.status == "succeeded", summary.error
    assert summary.result == 4
    assert checks == [0, 1, 2, 3]  # each check once, none again on replay
    assert record.counters.waits == 3  # a durable sleep between two checks


def test_a_condition_out_of_attempts_raises_condition_not_met(make_runtime, flavour):
    app, checks = polling_app(flavour)
    runtime = make_runtime(app)
    summary = runtime.run("poll", {"ready_at": 10, "max_attempts": 2})
    assert summary.status == "succeeded", summary.error
    assert summary.result.startswith("gave up: ")
    assert checks == [0, 1]


def test_a_cancel_during_a_conditions_delay_ends_the_task_cancelled(make_runtime, flavour):
    app, checks = polling_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("poll", {"ready_at": 10})
        runtime.invoke_once()
        assert runtime.record(task_id).status == Status.WAITING  # after the first check
        client.cancel(task_id, "no longer needed")
        done = runtime.drive(task_id)
    assert done.status == "cancelled"
    assert checks == [0]
