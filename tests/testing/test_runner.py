"""TaskRunner: a user's test runs tasks to their end or their wait, answers them, moves time."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest

from continuum import (
    ConfigurationError,
    Continuum,
    ContinuumError,
    Status,
    TaskContext,
    TaskFailedError,
    TaskNotFinishedError,
    WaitKind,
)
from continuum.testing import TaskRunner
from tests.testing.apps import Empty, Receipt, shop
from tests.waits.test_cancel import cancellable_app


def test_a_task_runs_to_its_end_and_the_handle_reads_its_result_and_steps(backend):
    app, ran = shop()
    with TaskRunner(app, backend=backend) as runner:
        task = runner.run("listen", {"wants": 0})  # takes one signal... none needed: see below
        assert task.status == Status.WAITING  # it waits for its first signal
        task.signal("order", "first")
        assert task.result == ["first"]
        assert task.status == "succeeded"
        assert task.step_counts == {"handle": 1}
        [run] = task.step_runs
        assert (run.key, run.turn, run.args, run.value) == ("handle#1", 0, ("first",), "first")
        assert task.counters.invocations == 2
    assert ran == ["handle first"]


def test_a_task_waiting_for_a_callback_stops_there_and_its_answer_runs_it_on(backend):
    app, ran = shop()
    with TaskRunner(app, backend=backend) as runner:
        task = runner.run("approve", {"item": "kayak"})
        assert task.status == Status.WAITING
        [waiter] = task.waiting_for
        assert (waiter.kind, waiter.name) == (WaitKind.CALLBACK, "manager")
        callback = task.callback("manager")
        assert callback.id == waiter.id
        assert callback.complete({"approved": True}) is task
        assert task.result == "shipped kayak #1"
        assert task.waiting_for == []
    assert ran == ["reserve kayak", "ask manager", "ship kayak #1"]  # each step once


def test_a_failed_callback_fails_the_task_and_result_raises_from_what_failed_it():
    app, ran = shop()
    with TaskRunner(app) as runner:
        task = runner.run("approve", {"item": "kayak"})
        task.callback().fail("Rejected", "not this week")  # the only open callback
        assert task.status == Status.FAILED
        assert task.error.type == "CallbackFailedError"
        with pytest.raises(TaskFailedError, match="'approve' failed: CallbackFailedError") as e:
            task.result
    assert "not this week" in str(e.value)
    assert e.value.task_id == task.task_id
    assert type(e.value.__cause__).__name__ == "CallbackFailedError"  # with its traceback
    assert "ship kayak #1" not in ran


def test_a_task_whose_own_code_raises_fails_and_result_raises_from_that_exception():
    app = Continuum()

    @app.task(state=Empty)
    def broken(ctx: TaskContext[Empty]) -> int:
        return {"a": 1}["b"]

    with TaskRunner(app) as runner:
        task = runner.run("broken", {})
        with pytest.raises(TaskFailedError, match="KeyError") as caught:
            task.result
    assert isinstance(caught.value.__cause__, KeyError)


def test_signals_are_kept_until_the_task_takes_them_in_the_order_sent(backend):
    app, ran = shop()
    with TaskRunner(app, backend=backend) as runner:
        task = runner.start("listen", {"wants": 3})
        task.signal("order", 1).signal("order", 2)  # each runs the task on, to its next wait
        assert task.status == Status.WAITING
        task.signal("order", 3)
        assert task.result == [1, 2, 3]
    assert ran == ["handle 1", "handle 2", "handle 3"]


def test_a_thirty_day_sleep_ends_at_once_and_no_step_runs_while_it_lasts():
    app, ran = cancellable_app()
    started = time.monotonic()
    with TaskRunner(app) as runner:
        before = runner.now
        task = runner.run("chore", {"sleep_days": 30, "steps": 2})
        assert task.result == "finished anyway"
        assert runner.now - before >= timedelta(days=30)  # on the virtual clock
        assert task.counters.hops == 0  # one message on the memory backend, not 2,880 hops
    assert time.monotonic() - started < 5  # on the wall clock
    assert ran == ["work 0", "work 1", "work 99"]


def test_advance_moves_through_a_long_sleep_running_its_timers_as_they_come_due(backend):
    app, ran = cancellable_app()
    # Without a scheduler a sleep is a chain of 900 s hops; the memory backend may do the same.
    with TaskRunner(app, backend=backend, max_delay_s=900, scheduler=False) as runner:
        task = runner.start("chore", {"sleep_days": 1 / 24, "steps": 2})  # an hour
        runner.advance(timedelta(minutes=59))
        assert task.status == Status.WAITING
        assert task.counters.hops == 3  # at 15, 30 and 45 minutes
        assert ran == ["work 0", "work 1"]
        runner.advance(120)
        assert task.result == "finished anyway"
    assert ran == ["work 0", "work 1", "work 99"]


def test_advance_fires_the_schedule_of_a_long_sleep_on_the_runners_clock(backend):
    app, ran = cancellable_app()
    # With a scheduler (the default) an hour's sleep is one schedule, as on a deployed stack.
    with TaskRunner(app, backend=backend, max_delay_s=900) as runner:
        task = runner.start("chore", {"sleep_days": 1 / 24, "steps": 2})  # an hour
        runner.advance(timedelta(minutes=59))
        assert task.status == Status.WAITING
        assert task.counters.hops == 1  # the schedule's fire, five minutes early
        assert ran == ["work 0", "work 1"]
        runner.advance(120)
        assert task.result == "finished anyway"
    assert ran == ["work 0", "work 1", "work 99"]


def test_advance_lets_a_callback_time_out_when_its_deadline_comes_and_not_before():
    app, _ = shop()
    with TaskRunner(app) as runner:
        task = runner.run("approve", {"item": "kayak", "timeout_days": 2})
        runner.advance(timedelta(days=1, hours=23))
        assert task.status == Status.WAITING
        runner.advance(timedelta(hours=2))
        assert task.status == Status.FAILED
        assert task.error.type == "CallbackTimeoutError"


def test_run_until_done_lets_the_timeout_fire_and_refuses_a_wait_that_has_none():
    app, _ = shop()
    with TaskRunner(app) as runner:
        timed = runner.run("approve", {"item": "kayak"}).run_until_done()
        assert timed.error.type == "CallbackTimeoutError"
        forever = runner.run("receipt", {"item": "kayak"})  # no timeout
        with pytest.raises(TaskNotFinishedError, match="waiting, waiting for callback 'manager'"):
            forever.run_until_done()
        with pytest.raises(TaskNotFinishedError, match=re.escape("callback(name).complete")):
            forever.result


def test_cancel_ends_a_sleeping_task_cancelled_after_its_cleanup(backend):
    app, ran = cancellable_app()
    with TaskRunner(app, backend=backend) as runner:
        task = runner.start("chore", {"sleep_days": 30, "steps": 2})
        runner.advance(timedelta(hours=1))
        assert task.status == Status.WAITING
        task.cancel("not needed any more")
        assert task.status == Status.CANCELLED
        with pytest.raises(TaskFailedError, match="cancelled: TaskCancelledError"):
            task.result
    assert ran == ["work 0", "work 1", "clean up"]


def test_a_small_budget_shows_continuations_and_each_step_still_runs_once():
    app, _ = shop(default_step_s=0.05, safety_margin_s=0.05)

    @app.step
    def slow(i: int) -> int:
        time.sleep(0.03)
        return i

    @app.task(state=Empty)
    def many(ctx: TaskContext[Empty]) -> list[int]:
        return [slow(i) for i in range(10)]

    with TaskRunner(app, budget_s=0.2) as runner:
        task = runner.run(many, {})  # the task as decorated, or its name
        assert task.result == list(range(10))
        assert task.counters.continuations >= 1
        assert task.step_counts == {"slow": 10}


def test_a_result_comes_back_as_the_type_the_task_returned():
    app, _ = shop()
    with TaskRunner(app) as runner:
        task = runner.run("receipt", {"item": "kayak"})
        task.callback("manager").complete({"approved": True})
        assert task.result == Receipt(item="kayak #1", approved=True)
        assert task.record.result == {"item": "kayak #1", "approved": True}  # as stored


def plain(x: int) -> int:
    """An undecorated function, called as a step (its name: its qualified name)."""
    return x * 2


def test_every_kind_of_step_call_is_counted_and_a_step_inside_a_step_is_part_of_it():
    app = Continuum()

    @app.step
    def inner(x: int) -> int:
        return x + 1

    @app.step
    def outer(x: int) -> int:
        return inner(x) * 10

    @app.task(state=Empty)
    def mixed(ctx: TaskContext[Empty]) -> list[int]:
        found = ctx.wait_for_condition(
            plain, initial=1, done=lambda n: n >= 4, delay_s=60, name="poll"
        )
        return [outer(1), ctx.step(plain, 5), ctx.step(plain, 6, key="mine"), found]

    with TaskRunner(app) as runner:
        task = runner.run("mixed", {})
        assert task.result == [20, 10, 12, 4]
        assert task.step_counts == {"poll": 2, "outer": 1, "plain": 2}  # inner: inside outer
        keys = [run.key for run in task.step_runs]
        assert keys == ["poll#0", "poll#2", "outer#3", "plain#4", "mine"]


def test_leaving_the_runner_points_the_app_back_where_it_pointed_and_unwraps_its_tasks():
    app, _ = shop()
    app.configure(bucket="my-bucket", queue_url="https://sqs.example/q")
    approve = app.tasks["approve"].fn
    with TaskRunner(app, backend="moto") as runner:
        runner.run("approve", {"item": "kayak"})
        assert app.tasks["approve"].fn is not approve
    assert app.tasks["approve"].fn is approve
    assert app._backends.config.bucket == "my-bucket"
    assert app._backends.config.store is None  # S3 again, not the runner's store
    with pytest.raises(ConfigurationError, match="not open"):
        runner.run("approve", {"item": "kayak"})


def test_a_callback_that_is_not_open_is_refused_naming_those_that_are():
    app, _ = shop()
    with TaskRunner(app) as runner:
        task = runner.run("approve", {"item": "kayak"})
        with pytest.raises(ContinuumError, match=r"has not callback 'boss'.*'manager'"):
            task.callback("boss")
        task.callback("manager").complete({"approved": False})
        assert task.result == "declined"
        with pytest.raises(ContinuumError, match="open callbacks: none"):
            task.callback()


def test_advance_needs_the_virtual_clock():
    app, _ = shop()
    with TaskRunner(app, virtual_time=False) as runner, pytest.raises(ConfigurationError):
        runner.advance(1)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_backoff_and_a_short_sleep_pass_on_the_virtual_clock_not_in_real_time(
    flavour, monkeypatch
):
    """A retry's backoff that fits in the invocation (ten minutes) and a half-second sleep
    move the TaskRunner's virtual clock; nothing sleeps in real time for them."""
    import asyncio
    import time as real_time

    slept: list[float] = []
    real_sleep, real_async_sleep = real_time.sleep, asyncio.sleep

    def counted_sleep(seconds: float) -> None:
        slept.append(seconds)
        real_sleep(min(seconds, 0.01))

    async def counted_async_sleep(seconds: float, *args: object) -> None:
        slept.append(seconds)
        await real_async_sleep(0)

    monkeypatch.setattr(real_time, "sleep", counted_sleep)
    monkeypatch.setattr(asyncio, "sleep", counted_async_sleep)
    app, starts = Continuum(), []

    if flavour == "sync":

        @app.step(retries=1, backoff_s=600)
        def flaky() -> str:
            starts.append(real_time.time())
            if len(starts) == 1:
                raise ConnectionError("down")
            return "up"

        @app.task(state=Empty)
        def job(ctx: TaskContext[Empty]) -> str:
            ctx.sleep(0.5, name="blink")
            return flaky()

    else:

        @app.step(retries=1, backoff_s=600)
        async def flaky() -> str:
            starts.append(real_time.time())
            if len(starts) == 1:
                raise ConnectionError("down")
            return "up"

        @app.task(state=Empty)
        async def job(ctx: TaskContext[Empty]) -> str:
            await ctx.sleep_async(0.5, name="blink")
            return await flaky()

    with TaskRunner(app) as runner:
        handle = runner.run("job", {})
        assert (handle.status, handle.result) == ("succeeded", "up")
    assert starts[1] - starts[0] >= 600  # on the virtual clock
    assert not [s for s in slept if s >= 0.5], slept
