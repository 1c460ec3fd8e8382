"""Locally the app's declared schedules are synced into the local scheduler when the runtime
starts, so that a firer on its clock fires them into the runtime's queue."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from continuum import Continuum, Status, TaskContext
from continuum.backends.memory import InMemoryContinuationQueue
from continuum.backends.memory.clock import ManualClock
from continuum.testing import InMemoryScheduler, TaskRunner
from tests.schedules.conftest import Report
from tests.support import LocalRuntime, moto_backend


def test_the_local_runtime_syncs_the_declared_schedules_and_their_fires_run():
    clock = ManualClock(time.time())
    scheduler = InMemoryScheduler(clock=clock)
    app = Continuum(scheduler=scheduler)

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        return ctx.state.region

    app.schedule("hourly", report, cron="cron(0 * * * ? *)", input={"region": "eu"})
    app.schedule("often", report, every=timedelta(minutes=5),
                 input={"region": "us"})  # fmt: skip
    runtime = LocalRuntime(app, budget_s=30, backend="memory")
    assert [s.name for s in scheduler.schedules()] == ["_schedule.hourly", "_schedule.often"]
    fired = scheduler.fire_due(runtime.queue)  # "often" fires at its creation
    assert [f.name for f in fired] == ["_schedule.often"]
    runtime.invoke_once()  # the fire: it starts the run
    (task_id,) = runtime.observer.task_ids()
    assert task_id.startswith("often-")
    runtime.drive(task_id)
    assert runtime.record(task_id).result == "us"


def test_a_runtime_on_memory_never_syncs_into_a_scheduler_the_environment_names(monkeypatch):
    for name, value in {
        "CONTINUUM_SCHEDULE_GROUP": "real-group",
        "CONTINUUM_SCHEDULER_ROLE_ARN": "arn:aws:iam::1:role/r",
        "CONTINUUM_QUEUE_ARN": "arn:aws:sqs:us-east-1:1:q",
    }.items():
        monkeypatch.setenv(name, value)
    app = Continuum()

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        return ctx.state.region

    app.schedule("hourly", report, cron="cron(0 * * * ? *)", input={"region": "eu"})
    LocalRuntime(app, budget_s=30, backend="memory")  # no call to EventBridge Scheduler


def test_a_local_run_whose_schedules_cannot_sync_goes_on_and_says_so(monkeypatch, caplog):
    for name, value in {
        "CONTINUUM_SCHEDULE_GROUP": "no-such-group",
        "CONTINUUM_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/r",
        "CONTINUUM_QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    app = Continuum()

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        return ctx.state.region

    app.schedule("hourly", report, cron="cron(0 * * * ? *)", input={"region": "eu"})
    with moto_backend(), caplog.at_level(logging.WARNING):
        runtime = LocalRuntime(app, budget_s=30, backend="moto")
        assert runtime.run("report", {"region": "eu"}).result == "eu"
    assert "the app's schedules were not synced" in caplog.text
    assert "no-such-group" in caplog.text


def hourly_app() -> Continuum:
    app = Continuum()

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        return ctx.state.region

    app.schedule("hourly", report, cron="cron(0 * * * ? *)", input={"region": "eu"},
                 overlap="allow")  # fmt: skip
    return app


def runs(runner: TaskRunner) -> list[str]:
    return runner.runtime.observer.task_ids()


def test_a_task_runner_fires_the_apps_declared_schedules_on_its_clock(backend):
    with TaskRunner(hourly_app(), backend=backend) as runner:
        runner.advance(timedelta(hours=3))
        assert len(runs(runner)) == 3
        assert {runner.runtime.record(t).status for t in runs(runner)} == {Status.SUCCEEDED}


@pytest.mark.parametrize("days", [2, -2], ids=["ahead", "behind"])
def test_a_task_runner_started_elsewhere_in_time_fires_its_schedules_from_its_start(backend, days):
    start = (datetime.now(UTC) + timedelta(days=days)).replace(minute=30, second=0, microsecond=0)
    with TaskRunner(hourly_app(), backend=backend, start_at=start) as runner:
        runner.advance(timedelta(minutes=1))
        assert runs(runner) == []  # nothing was due between the schedule's making and now
        runner.advance(timedelta(hours=3))
        hours = [start.replace(minute=0) + timedelta(hours=h) for h in (1, 2, 3)]
        assert runs(runner) == [f"hourly-{h:%Y%m%dT%H%M%SZ}" for h in hours]


def test_a_resumed_schedule_fires_from_its_next_time_not_the_times_it_was_paused(backend):
    app = hourly_app()
    with TaskRunner(app, backend=backend) as runner:
        runner.advance(timedelta(hours=2))
        assert len(runs(runner)) == 2
        scheduler = app.scheduler()
        assert scheduler is not None
        scheduler.pause("_schedule.hourly")
        runner.advance(timedelta(hours=5))
        scheduler.resume("_schedule.hourly")
        runner.advance(timedelta(minutes=1))
        assert len(runs(runner)) == 2  # the five paused hours stay unfired
        runner.advance(timedelta(hours=1))
        assert len(runs(runner)) == 3


@pytest.fixture
def rate_times_listed(monkeypatch) -> list[int]:
    """How many times each of the in-memory firer's listings of a rate held."""
    from continuum.backends.memory import scheduler as memory_scheduler

    listed: list[int] = []
    real = memory_scheduler.rate_times

    def counted(*args: Any) -> list[datetime]:
        times = real(*args)
        listed.append(len(times))
        return times

    monkeypatch.setattr(memory_scheduler, "rate_times", counted)
    return listed


def test_the_next_fire_of_a_one_minute_rate_is_computed_not_listed_from_a_year_of_times(
    rate_times_listed,
):
    clock = ManualClock(1_800_000_000.0)
    scheduler = InMemoryScheduler(clock=clock)
    scheduler.put_recurring(name="often", expression="rate(1 minute)", message_body="{}")
    created = datetime.fromtimestamp(1_800_000_000.0, UTC)
    assert scheduler.next_due_at() == created  # a rate's first time is its creation
    clock.advance(90)
    scheduler.fire_due(InMemoryContinuationQueue())
    assert scheduler.next_due_at() == created + timedelta(minutes=2)
    assert sum(rate_times_listed) <= 2  # the fires due; the next time is one division


def test_a_task_runner_run_with_a_one_minute_rate_lists_only_the_times_that_fire(
    rate_times_listed,
):
    app = Continuum()

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        ctx.sleep(30)
        return ctx.state.region

    app.schedule("often", report, every=timedelta(minutes=1), input={"region": "us"})
    with TaskRunner(app) as runner:
        assert runner.run(report, {"region": "eu"}).result == "eu"
    assert sum(rate_times_listed) <= 10


def test_a_test_of_one_task_runs_that_task_alone_and_advance_fires_the_schedules(backend):
    app = Continuum()

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str:
        ctx.sleep(timedelta(hours=1))
        return ctx.state.region

    app.schedule("often", report, every=timedelta(minutes=1), input={"region": "us"},
                 overlap="allow")  # fmt: skip
    with TaskRunner(app, backend=backend) as runner:
        assert runner.run(report, {"region": "eu"}, task_id="mine").result == "eu"
        assert runs(runner) == ["mine"]  # the hour it slept fired no schedule
        runner.advance(timedelta(minutes=2))
        assert len(runs(runner)) == 3  # a time passed by the test's advance fires
