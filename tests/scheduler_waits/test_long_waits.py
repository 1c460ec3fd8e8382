"""Long waits on a scheduler: one one-time schedule per wait, whatever its length, on the second.

Every test runs on both backends (the in-memory scheduler, and EventBridge Scheduler on moto,
fired by the runtime), on the virtual clock.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._record.model import TaskRecord
from continuum._worker.long_waits import LEAD_S
from continuum.backends.scheduler import Schedule, SchedulerError, TransientSchedulerError

DAY = 86_400


class Nap(BaseModel):
    days: float = 7.0


class Empty(BaseModel):
    pass


def nap_app() -> tuple[Continuum, list[tuple[str, float]]]:
    """Task ``nap``: a step, ``ctx.sleep(days)``, a step; each live step notes its time."""
    app = Continuum()
    ran: list[tuple[str, float]] = []

    @app.step
    def note(what: str) -> float:
        ran.append((what, time.time()))
        return time.time()

    @app.task(state=Nap)
    def nap(ctx: TaskContext[Nap]) -> float:
        note("before")
        ctx.sleep(timedelta(days=ctx.state.days))
        return note("after")

    return app, ran


def scheduled(runtime: Any) -> list[Schedule]:
    """The schedules in the runtime's group, uncounted."""
    assert runtime.firer is not None
    return list(runtime.firer.scheduler.schedules())


def park(runtime: Any, app: Continuum, days: float = 7.0) -> tuple[str, TaskRecord]:
    """Start a nap and run its first invocation: the task is parked on its schedule."""
    task_id = app.client().start("nap", {"days": days})
    runtime.invoke_once()
    record = runtime.record(task_id)
    assert record.status == Status.WAITING
    return task_id, record


def test_a_seven_day_sleep_is_one_schedule_and_one_hop_and_ends_on_the_second(make_runtime):
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id, record = park(runtime, app)
        assert record.schedule is not None  # named before the write that parked the task
        (schedule,) = scheduled(runtime)
        assert schedule.name == record.schedule
        assert schedule.one_time
        assert record.wake_at is not None
        assert schedule.at is not None
        assert record.wake_at - schedule.at <= timedelta(seconds=LEAD_S + 1)  # a few minutes early
        summary = runtime.drive(task_id)
    done = runtime.record(task_id)
    assert summary.status == "succeeded"
    assert [what for what, _ in ran] == ["before", "after"]
    assert done.counters.hops == 1  # the fire, a few minutes early: one delayed message left
    assert done.schedule is None
    assert scheduled(runtime) == []
    deadline = done.journal[1].deadline
    assert deadline is not None
    woke = ran[1][1]
    assert deadline <= woke < deadline + 1  # on the second


def calls_of_a_sleep(make_runtime: Any, days: float) -> tuple[dict[str, int], int]:
    app, _ = nap_app()
    runtime = make_runtime(app, scheduler=True)
    summary = runtime.run("nap", {"days": days})
    assert summary.status == "succeeded"
    return dict(runtime.counter.calls), runtime.invocations


def test_a_wait_costs_the_same_calls_whatever_its_length(make_runtime):
    counted = {days: calls_of_a_sleep(make_runtime, days) for days in (1 / 24, 1, 7, 30)}
    calls, invocations = counted[7]
    assert calls["scheduler:CreateSchedule"] == 1
    assert "scheduler:DeleteSchedule" not in calls  # it fired, and deleted itself
    assert invocations == 3  # the start, the fire's hop, and the delayed timer's wake
    for days, (other, other_invocations) in counted.items():
        assert (other, other_invocations) == (calls, invocations), days


def test_a_double_fire_and_a_late_fire_are_fenced(make_runtime):
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id, _record = park(runtime, app)
        (schedule,) = scheduled(runtime)
        runtime.source.send(schedule.message_body)  # a duplicate fire, now: a hop like the fire
        summary = runtime.drive(task_id)
        assert summary.status == "succeeded"
        runtime.source.send(schedule.message_body)  # a late fire, after the task finished
        runtime.invoke_once()
    assert [what for what, _ in ran] == ["before", "after"]
    assert runtime.record(task_id).status == Status.SUCCEEDED


def test_a_fire_that_comes_after_its_deadline_wakes_the_task_at_once(make_runtime):
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id, _record = park(runtime, app, days=2)
        (schedule,) = scheduled(runtime)
        runtime.firer.scheduler.delete(schedule.name)  # EventBridge late: it fires by hand
        runtime.time.advance(3 * DAY)
        runtime.source.send(schedule.message_body)
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert [what for what, _ in ran] == ["before", "after"]
    assert runtime.record(task_id).counters.hops == 0  # due: it ran, it did not hop


def approval_app() -> tuple[Continuum, list[str]]:
    """Task ``ask``: wait a week for a callback, twice; each answer is noted by a step."""
    app = Continuum()
    ran: list[str] = []

    @app.step
    def note(what: str) -> str:
        ran.append(what)
        return what

    @app.task(state=Empty)
    def ask(ctx: TaskContext[Empty]) -> str:
        for round_ in range(2):
            cb = ctx.create_callback(f"approval-{round_}", timeout=timedelta(days=7))
            note(f"asked {round_}")
            note(f"answer {cb.result()}")
        return "done"

    return app, ran


def test_a_wake_deletes_the_schedule_and_a_stale_fire_after_it_changes_nothing(make_runtime):
    app, ran = approval_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id = app.client().start("ask", {})
        runtime.invoke_once()
        first = runtime.record(task_id)
        (schedule,) = scheduled(runtime)
        assert first.schedule == schedule.name
        callback_id = first.waiting_for[0].id
        assert callback_id is not None
        app.client().complete_callback(callback_id, "yes")
        runtime.invoke_once()  # the wake: the claim deletes the first wait's schedule
        second = runtime.record(task_id)
        assert second.status == Status.WAITING
        assert second.generation > first.generation
        names = [s.name for s in scheduled(runtime)]
        assert names == [second.schedule]
        assert schedule.name not in names
        runtime.source.send(schedule.message_body)  # the first wait's fire, after all: stale
        runtime.invoke_once()
        assert runtime.record(task_id).generation == second.generation
    assert ran == ["asked 0", "answer yes", "asked 1"]
    assert runtime.counter.calls["scheduler:DeleteSchedule"] == 1


def test_a_callback_timeout_a_week_away_times_out_on_the_second(make_runtime):
    app, _ran = approval_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id = app.client().start("ask", {})
        runtime.invoke_once()
        deadline = runtime.record(task_id).wake_at
        assert deadline is not None
        summary = runtime.drive(task_id, stop_when_waiting=False)
    record = runtime.record(task_id)
    assert summary.status == "failed"
    assert record.error is not None
    assert record.error.type == "CallbackTimeoutError"
    assert record.counters.hops == 1
    assert record.finished_at is not None
    assert deadline <= record.finished_at < deadline + timedelta(seconds=2)


def test_cancel_deletes_the_schedule(make_runtime):
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id, _ = park(runtime, app, days=30)
        assert len(scheduled(runtime)) == 1
        app.client().cancel(task_id, reason="no longer needed")
        summary = runtime.drive(task_id)
    assert summary.status == "cancelled"
    assert scheduled(runtime) == []
    assert runtime.counter.calls["scheduler:DeleteSchedule"] == 1
    assert [what for what, _ in ran] == ["before"]


class Refusing:
    """The app's scheduler, refusing every create (as a missing permission, or a throttle)."""

    def __init__(self, inner: Any, error: type[SchedulerError]) -> None:
        self.inner = inner
        self.error = error
        self.refused = 0

    def schedule_at(self, *, name: str, at: Any, message_body: str) -> None:
        self.refused += 1
        raise self.error("refused", schedule=name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("error", [SchedulerError, TransientSchedulerError])
def test_a_create_that_fails_falls_back_to_the_hop_chain(make_runtime, error, caplog):
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    refusing = Refusing(runtime._next_fire.scheduler, error)
    runtime._next_fire.scheduler = refusing
    with caplog.at_level("WARNING", logger="continuum._worker.long_waits"):
        summary = runtime.run("nap", {"days": 1 / 12})  # two hours: 7 hops
    record = runtime.record(summary.task_id)
    assert summary.status == "succeeded"
    assert [what for what, _ in ran] == ["before", "after"]
    assert record.counters.hops == 7  # the hop chain, as without a scheduler
    assert refusing.refused == 7  # the wait, then each hop while the deadline is out of reach
    assert "hopping on delayed timers" in caplog.text
    assert app._worker is not None
    assert app._worker.long_waits.fallbacks == 7


class DiesOnce:
    """The app's scheduler, whose first create kills the worker (after the parking write)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def schedule_at(self, *, name: str, at: Any, message_body: str) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the worker died before creating the schedule")
        self.inner.schedule_at(name=name, at=at, message_body=message_body)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_crash_between_the_parking_write_and_the_create_is_recovered_by_the_redelivery(
    make_runtime,
):
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    dies = DiesOnce(runtime._next_fire.scheduler)
    runtime._next_fire.scheduler = dies
    with runtime.time.running():
        task_id = app.client().start("nap", {"days": 7})
        result = runtime.invoke_once()
        assert result is not None
        assert result["batchItemFailures"]
        record = runtime.record(task_id)
        assert record.status == Status.WAITING
        assert record.schedule is not None
        assert scheduled(runtime) == []
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert dies.calls == 2  # the redelivery created it (the fence's re-send)
    assert runtime.record(task_id).counters.hops == 1
    assert [what for what, _ in ran] == ["before", "after"]


def test_creating_a_wait_schedule_again_after_a_lost_answer_is_the_same_schedule(make_runtime):
    """A worker that created the schedule and died before acknowledging: the redelivery's
    re-send creates it again, with the same name, time and body: no conflict, no fallback."""
    app, _ = nap_app()
    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id, record = park(runtime, app)
        worker = app._worker
        assert worker is not None
        from continuum._worker.endings import resend

        resend(record, app.records, app.continuations, long_waits=worker.long_waits)
        assert worker.long_waits.fallbacks == 0
        assert [s.name for s in scheduled(runtime)] == [record.schedule]
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"


class RefusesOnce(DiesOnce):
    """The app's scheduler, whose first create fails (the worker falls back to its timer);
    ``before_create(name)``, if set, is called before each create that goes through."""

    before_create: Any = None

    def schedule_at(self, *, name: str, at: Any, message_body: str) -> None:
        self.calls += 1
        if self.calls == 1:
            raise SchedulerError("throttled", schedule=name)
        if self.before_create is not None:
            self.before_create(name)
        self.inner.schedule_at(name=name, at=at, message_body=message_body)


def test_a_hop_deletes_the_schedule_a_redelivery_created_after_a_failed_create(make_runtime):
    """The parking worker's create failed, so it sent the timer; its message, whose delete
    failed, came back and the re-send created the schedule after all. The timer's hop named
    the next generation's schedule and forgot this one, which stayed until its time (the
    fault run waited 15 minutes for it). A hop now deletes the schedule it replaces."""
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    once = RefusesOnce(runtime._next_fire.scheduler)
    runtime._next_fire.scheduler = once
    left_after_hops: list[list[str]] = []

    def after(_: Any) -> None:
        if runtime.record(task_id).counters.hops:
            left_after_hops.append([s.name for s in scheduled(runtime)])

    with runtime.time.running():
        task_id, record = park(runtime, app)
        assert scheduled(runtime) == []  # the create failed: the timer is on its way
        assert app._worker is not None
        from continuum._worker.endings import resend

        resend(record, app.records, app.continuations, long_waits=app._worker.long_waits)
        assert [s.name for s in scheduled(runtime)] == [record.schedule]
        left_at_next: list[list[str]] = []

        def noting(name: str) -> None:
            if name != record.schedule:  # the hop's next schedule: a kill after it loses nothing
                left_at_next.append([s.name for s in scheduled(runtime)])

        once.before_create = noting
        summary = runtime.drive(task_id, on_invocation=after)
    assert summary.status == "succeeded"
    assert left_after_hops, "the timer hopped"
    assert all(record.schedule not in names for names in left_after_hops)
    assert left_at_next, "the hop handed its next timer to a schedule"
    assert all(record.schedule not in names for names in left_at_next)
    assert [what for what, _ in ran] == ["before", "after"]


def test_a_redelivery_that_creates_a_schedule_after_a_hop_moved_on_deletes_it(make_runtime):
    """The same, the other way round: the hop came first (it had nothing to delete), then the
    redelivery's re-send, holding the record it read before the hop, created the schedule of a
    generation gone. It reads the record again and deletes what it created."""
    app, ran = nap_app()
    runtime = make_runtime(app, scheduler=True)
    once = RefusesOnce(runtime._next_fire.scheduler)
    runtime._next_fire.scheduler = once
    with runtime.time.running():
        task_id, before = park(runtime, app)
        while runtime.record(task_id).counters.hops == 0:  # the fallback timer hops
            due = runtime.next_due()
            assert due is not None
            runtime.time.wait_until(due, poll_s=0.01)
            runtime.invoke_once()
        after = runtime.record(task_id)
        assert [s.name for s in scheduled(runtime)] == [after.schedule]
        assert app._worker is not None
        from continuum._worker.endings import resend

        resend(before, app.records, app.continuations, long_waits=app._worker.long_waits)
        assert [s.name for s in scheduled(runtime)] == [after.schedule]
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert [what for what, _ in ran] == ["before", "after"]


def test_a_retry_backoff_past_one_delayed_message_is_a_schedule(make_runtime):
    app = Continuum()
    attempts: list[float] = []

    @app.step(retries=1, backoff_s=2 * DAY)
    def flaky() -> str:
        attempts.append(time.time())
        if len(attempts) == 1:
            raise ValueError("not yet")
        return "ok"

    @app.task(state=Empty)
    def retrying(ctx: TaskContext[Empty]) -> str:
        return flaky()

    runtime = make_runtime(app, scheduler=True)
    with runtime.time.running():
        task_id = app.client().start("retrying", {})
        runtime.invoke_once()
        record = runtime.record(task_id)
        assert record.status == Status.WAITING  # as a sleep waits
        assert record.schedule is not None
        assert len(scheduled(runtime)) == 1
        summary = runtime.drive(task_id)
    done = runtime.record(task_id)
    assert summary.status == "succeeded"
    assert done.counters.hops == 1
    assert len(attempts) == 2
    assert 2 * DAY <= attempts[1] - attempts[0] < 2 * DAY + 2  # on the second


def test_without_a_scheduler_a_long_sleep_hops_as_before(make_runtime):
    app, _ = nap_app()
    runtime = make_runtime(app)
    summary = runtime.run("nap", {"days": 1 / 12})
    record = runtime.record(summary.task_id)
    assert record.counters.hops == 7
    assert record.schedule is None
    assert not any(key.startswith("scheduler:") for key in runtime.counter.calls)


def test_a_record_written_before_schedules_reads_as_naming_none():
    record = TaskRecord(task_id="t1", task_name="nap")
    stored = record.model_dump(mode="json")
    del stored["schedule"]
    assert TaskRecord.model_validate(stored).schedule is None
