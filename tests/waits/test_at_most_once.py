"""At most once: a step whose worker died inside it is never run again; and retries that wait."""

from __future__ import annotations

import itertools
import time

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, Status, TaskContext


class Transfer(BaseModel):
    retries: int = 0


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process: nothing in the framework catches it."""


def transfer_app(*, die_times: int) -> tuple[Continuum, list[str]]:
    app = Continuum()
    ran: list[str] = []

    @app.step(at_most_once=True, retries=1, backoff_s=30)
    def send_money(amount: int) -> str:
        ran.append("send")
        if ran.count("send") <= die_times:
            raise WorkerDied  # the worker dies inside the step, after its effect
        return f"sent {amount}"

    @app.step(at_most_once=True)
    def send_once(amount: int) -> str:
        ran.append("send once")
        if ran.count("send once") <= die_times:
            raise WorkerDied
        return f"sent {amount} once"

    @app.task(state=Transfer)
    def transfer(ctx: TaskContext[Transfer]) -> str:
        if ctx.state.retries:
            return send_money(100)
        return send_once(100)

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


def test_an_at_most_once_step_whose_worker_died_fails_and_is_not_run_again(make_runtime):
    app, ran = transfer_app(die_times=1)
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
    make_runtime,
):
    app, ran = transfer_app(die_times=1)
    runtime = make_runtime(app, budget_s=5)
    with runtime.time.running():
        task_id = app.client().start("transfer", {"retries": 1})
        run_dying(runtime, task_id, deaths=1)
        record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED
    assert record.result == "sent 100"
    assert ran == ["send", "send"]  # the interrupted attempt and one new one, never more


def test_a_started_marker_is_saved_before_an_at_most_once_step_runs(make_runtime):
    app = Continuum()
    seen: list[list[str]] = []
    runtime = make_runtime(app)

    @app.step(at_most_once=True)
    def charge() -> str:
        stored = runtime.record(task_id)  # what a worker taking over would find
        seen.append([f"{e.key} started={e.started}" for e in stored.journal])
        return "charged"

    @app.task(state=Transfer)
    def pay(ctx: TaskContext[Transfer]) -> str:
        return charge()

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
    make_runtime,
):
    app = Continuum()
    attempts: list[float] = []

    @app.step(retries=2, backoff_s=600)
    def flaky() -> str:
        attempts.append(time.time())
        if len(attempts) < 3:
            raise ConnectionError("try later")
        return "ok"

    @app.task(state=Transfer)
    def patient(ctx: TaskContext[Transfer]) -> str:
        return flaky()

    runtime = make_runtime(app, budget_s=5)
    summary = runtime.run("patient", {})
    assert summary.status == "succeeded"
    assert len(attempts) == 3
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert 600 <= gaps[0] < 610  # waited its backoff in no invocation ...
    assert 1200 <= gaps[1] < 1210  # ... which doubled
