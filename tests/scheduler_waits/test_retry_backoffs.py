"""A retry's backoff that does not fit in the invocation waits as a sleep does.

The task is parked ``waiting`` until the next attempt may start: one schedule with a scheduler,
else a chain of timer hops that claim nothing; the step runs once more when the backoff ends.
Every test runs on both backends, on the virtual clock.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.fanout.kit import Trap, settle

DAY = 86_400


class Empty(BaseModel):
    pass


def backoff_app() -> tuple[Continuum, list[float]]:
    """Task ``retrying``: a step that fails within a day of its first call, with a backoff of
    a day: its second attempt succeeds."""
    app = Continuum()
    attempts: list[float] = []

    @app.step(retries=1, backoff_s=DAY)
    def flaky() -> str:
        attempts.append(time.time())
        if attempts[-1] < attempts[0] + DAY:
            raise ValueError("not yet")
        return "ok"

    @app.task(state=Empty)
    def retrying(ctx: TaskContext[Empty]) -> str:
        return flaky()

    return app, attempts


def sleep_app() -> tuple[Continuum, list[float]]:
    """Task ``retrying``: the same step calls with a one-day ``ctx.sleep`` between them."""
    app = Continuum()
    attempts: list[float] = []

    @app.step
    def steady() -> str:
        attempts.append(time.time())
        return "ok"

    @app.task(state=Empty)
    def retrying(ctx: TaskContext[Empty]) -> str:
        steady()
        ctx.sleep(timedelta(days=1))
        return steady()

    return app, attempts


def cost(make_runtime: Any, app: Continuum, *, scheduler: bool) -> dict[str, int]:
    runtime = make_runtime(app, scheduler=scheduler)
    summary = runtime.run("retrying", {})
    assert summary.status == "succeeded"
    record = runtime.record(summary.task_id)
    return {
        "claims": record.counters.invocations,
        "hops": record.counters.hops,
        "schedules": runtime.counter.calls.get("scheduler:CreateSchedule", 0),
    }


@pytest.mark.parametrize("scheduler", [False, True], ids=["hops", "scheduler"])
def test_a_one_day_backoff_costs_what_a_one_day_sleep_costs(make_runtime, scheduler):
    backoff = cost(make_runtime, backoff_app()[0], scheduler=scheduler)
    sleep = cost(make_runtime, sleep_app()[0], scheduler=scheduler)
    assert backoff == sleep
    assert backoff["claims"] == 2  # the one that parks, and the wake


def test_a_long_backoff_parks_the_task_waiting_until_the_next_attempt(make_runtime):
    app, attempts = backoff_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("retrying", {})
        runtime.invoke_once()
        record = runtime.record(task_id)
        assert record.status == Status.WAITING
        assert record.wake_at is not None
        assert record.wake_at.timestamp() == pytest.approx(attempts[0] + DAY, abs=1)
        (waiter,) = app.client().status(task_id).waiting_for
        assert waiter.kind == "time"
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert len(attempts) == 2  # the step ran again exactly once, after the backoff
    assert DAY <= attempts[1] - attempts[0] < DAY + 2  # on the second


def parks_waiting(key: str, fields: dict[str, Any]) -> bool:
    return key.endswith("/record.json") and fields.get("status") == "waiting"


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("scheduler", [False, True], ids=["hops", "scheduler"])
def test_a_worker_killed_at_the_write_that_parks_a_backoff_loses_nothing(
    make_runtime, scheduler, after
):
    app, attempts = backoff_app()
    runtime = make_runtime(app, scheduler=scheduler)
    Trap("put", parks_waiting, after=after).arm(app)
    task_id = app.client().start("retrying", {})
    with runtime.time.running():
        deaths = settle(runtime)
    assert deaths == 1
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED
    assert record.result == "ok"
    *failed, succeeded = attempts
    # Killed before the write, the failed attempt may run again (at least once); the attempt
    # after the backoff runs once, on the second.
    assert len(failed) in ((1,) if after else (1, 2))
    assert DAY <= succeeded - failed[-1] < DAY + 2


def test_a_long_backoff_in_a_map_item_parks_the_whole_task_once(make_runtime):
    app = Continuum()
    attempts: list[tuple[int, float]] = []

    @app.step(retries=1, backoff_s=DAY)
    def flaky(i: int) -> int:
        attempts.append((i, time.time()))
        if i == 1 and len(attempts) <= 2:
            raise ValueError("not yet")
        return 10 * i

    @app.task(state=Empty)
    def retrying(ctx: TaskContext[Empty]) -> list[int]:
        return ctx.map([0, 1], lambda c, i, n: flaky(i), name="each").values()

    runtime = make_runtime(app)
    summary = runtime.run("retrying", {})
    assert summary.status == "succeeded"
    record = runtime.record(summary.task_id)
    assert record.result == [0, 10]
    assert record.counters.invocations == 2
    assert sorted(i for i, _ in attempts) == [0, 1, 1]  # item 0 is not run again
