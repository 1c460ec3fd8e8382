"""At most once: a step whose worker died inside it is never run again; and retries that wait.

The tests with a task run in both flavours (``tests/waits/flavours.py``): the task ``def``, and
``async def`` awaiting ``async def`` steps (a worker that dies inside one dies out of the
event loop). Two tests are async only: sync steps an async task awaits in a thread, and a step
in an asyncio task group that cancels it. The check of the step's options has no task.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, Status, TaskContext
from tests.waits.flavours import Flavour


class Transfer(BaseModel):
    retries: int = 0


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process: nothing in the framework catches it."""


def transfer_app(flavour: Flavour, *, die_times: int) -> tuple[Continuum, list[str]]:
    app = Continuum()
    ran: list[str] = []

    @flavour.step(app, at_most_once=True, retries=1, backoff_s=30)
    def send_money(amount: int) -> str:
        ran.append("send")
        if ran.count("send") <= die_times:
            raise WorkerDied  # the worker dies inside the step, after its effect
        return f"sent {amount}"

    @flavour.step(app, at_most_once=True)
    def send_once(amount: int) -> str:
        ran.append("send once")
        if ran.count("send once") <= die_times:
            raise WorkerDied
        return f"sent {amount} once"

    def transfer(ctx: TaskContext[Transfer]) -> str:
        if ctx.state.retries:
            return send_money(100)
        return send_once(100)

    async def transfer_async(ctx: TaskContext[Transfer]) -> str:
        if ctx.state.retries:
            return await send_money(100)
        return await send_once(100)

    flavour.task(app, transfer, transfer_async, state=Transfer)
    return app, ran


def run_dying(runtime, task_id: str, *, deaths: int) -> None:
    """Invoke until the task finishes; each death leaves the message to come back later."""
    for _ in range(deaths + 10):
        if runtime.record(task_id).status.finished:
            return
        try:
            if runtime.invoke_once() is None:
                runtime.time.advance(runtime.visibility_timeout_s + 1)
        except WorkerDied:
            runtime.time.advance(runtime.visibility_timeout_s + 1)  # its lease and message expire


def test_an_at_most_once_step_whose_worker_died_fails_and_is_not_run_again(make_runtime, flavour):
    app, ran = transfer_app(flavour, die_times=1)
    runtime = make_runtime(app, budget_s=5)
    with runtime.time.running():
        task_id = app.client().start("transfer", {})
        run_dying(runtime, task_id, deaths=1)
        record = runtime.record(task_id)
    assert ran == ["send once"]  # once, although it never returned
    assert record.status == Status.FAILED
    assert record.error.type == "StepInterruptedError"
    assert "not run again" in record.error.message
    assert record.error.step == "send_once#0"


def test_with_retries_an_interrupted_at_most_once_step_gets_a_new_attempt_after_its_backoff(
    make_runtime, flavour
):
    app, ran = transfer_app(flavour, die_times=1)
    runtime = make_runtime(app, budget_s=5)
    with runtime.time.running():
        task_id = app.client().start("transfer", {"retries": 1})
        run_dying(runtime, task_id, deaths=1)
        record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED
    assert record.result == "sent 100"
    assert ran == ["send", "send"]  # the interrupted attempt and one new one, never more


def test_a_sync_at_most_once_step_an_async_task_awaits_in_a_thread_is_not_run_again(
    make_runtime,
):
    """The worker dies inside a sync step that ``ctx.step_async`` runs in a thread: the death
    comes out of the thread and the event loop, and the step is still not run again."""
    app = Continuum()
    ran: list[str] = []

    @app.step(at_most_once=True)
    def send_once(amount: int) -> str:
        ran.append("send once")
        if ran.count("send once") == 1:
            raise WorkerDied
        return f"sent {amount} once"

    @app.step(at_most_once=True, retries=1, backoff_s=30)
    def send_money(amount: int) -> str:
        ran.append("send")
        if ran.count("send") == 1:
            raise WorkerDied
        return f"sent {amount}"

    @app.task(state=Transfer)
    async def transfer(ctx: TaskContext[Transfer]) -> str:
        if ctx.state.retries:
            return await ctx.step_async(send_money, 100)
        return await ctx.step_async(send_once, 100)

    runtime = make_runtime(app, budget_s=5)
    with runtime.time.running():
        once = app.client().start("transfer", {})
        run_dying(runtime, once, deaths=1)
        retried = app.client().start("transfer", {"retries": 1})
        run_dying(runtime, retried, deaths=1)
        once_record, retried_record = runtime.record(once), runtime.record(retried)
    assert ran.count("send once") == 1
    assert once_record.status == Status.FAILED
    assert once_record.error.type == "StepInterruptedError"
    assert retried_record.status == Status.SUCCEEDED, retried_record.error
    assert retried_record.result == "sent 100"
    assert ran.count("send") == 2


def test_an_at_most_once_step_a_task_group_cancels_when_its_other_task_waits_is_kept(
    make_runtime,
):
    """A wait in one task of an ``asyncio.TaskGroup`` makes the group cancel the others; an
    at-most-once step running in one of them runs to its end and is recorded, rather than
    being cut short with its started marker (the next turn would fail it as interrupted)."""
    app = Continuum()
    ran: list[str] = []

    @app.step(at_most_once=True)
    async def charge() -> str:
        ran.append("start")
        await asyncio.sleep(0.2)
        ran.append("end")
        return "charged"

    @app.task(state=Transfer)
    async def grouped(ctx: TaskContext[Transfer]) -> list[Any]:
        async def receipt() -> Any:
            await asyncio.sleep(0.05)  # the charge is running by now
            signal = await ctx.wait_for_signal_async("receipt")
            return signal.payload if signal is not None else None

        async with asyncio.TaskGroup() as group:
            charged = group.create_task(charge())
            received = group.create_task(receipt())
        return [charged.result(), received.result()]

    runtime = make_runtime(app, budget_s=30)
    with runtime.time.running():
        waiting = runtime.run("grouped", {})
        assert waiting.status == "waiting", waiting.error
        app.client().signal(waiting.task_id, "receipt", "r-1")
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded", runtime.record(done.task_id).error
    assert done.result == ["charged", "r-1"]
    assert ran == ["start", "end"]  # once, to its end


def test_a_started_marker_is_saved_before_an_at_most_once_step_runs(make_runtime, flavour):
    app = Continuum()
    seen: list[list[str]] = []
    runtime = make_runtime(app)

    @flavour.step(app, at_most_once=True)
    def charge() -> str:
        stored = runtime.record(task_id)  # what a worker taking over would find
        seen.append([f"{e.key} started={e.started}" for e in stored.journal])
        return "charged"

    def pay(ctx: TaskContext[Transfer]) -> str:
        return charge()

    async def pay_async(ctx: TaskContext[Transfer]) -> str:
        return await charge()

    flavour.task(app, pay, pay_async, state=Transfer)

    with runtime.time.running():
        task_id = app.client().start("pay", {})
        done = runtime.drive(task_id)
    assert done.result == "charged"
    assert seen == [["charge#0 started=True"]]


def test_a_step_cannot_be_both_at_most_once_and_preemptible():
    app = Continuum()
    with pytest.raises(ConfigurationError, match="at_most_once and preemptible"):

        @app.step(at_most_once=True, preemptible=True)
        def both() -> None: ...


def test_a_retry_whose_backoff_does_not_fit_suspends_with_a_delay_instead_of_sleeping(
    make_runtime, flavour
):
    app = Continuum()
    attempts: list[float] = []

    @flavour.step(app, retries=2, backoff_s=600)
    def flaky() -> str:
        attempts.append(time.time())
        if len(attempts) < 3:
            raise ConnectionError("try later")
        return "ok"

    def patient(ctx: TaskContext[Transfer]) -> str:
        return flaky()

    async def patient_async(ctx: TaskContext[Transfer]) -> str:
        return await flaky()

    flavour.task(app, patient, patient_async, state=Transfer)

    runtime = make_runtime(app, budget_s=5)
    summary = runtime.run("patient", {})
    assert summary.status == "succeeded"
    assert len(attempts) == 3
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert 600 <= gaps[0] < 610  # waited its backoff in no invocation ...
    assert 1200 <= gaps[1] < 1210  # ... which doubled
