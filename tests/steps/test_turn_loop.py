"""The turn loop without AWS: replay, non-determinism, and when it suspends.

In both flavours (``tests/flavours.py``), where the task body is what differs: turns run to the
result, the budget rule with and without progress, a step that never fits, and a broad
``except Exception`` that cannot swallow a suspension. The others patch the sync step call or
look at the sync path's logs: sync only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from continuum import Continuum, Settings, TaskContext
from tests.flavours import FLAVOURS
from tests.support import (
    Budget,
    ErrorInfo,
    InvocationRun,
    JournalEntry,
    Returned,
    StepStats,
    Suspended,
    TaskRecord,
    TurnLoop,
    observe,
)


class Count(BaseModel):
    n: int = 0


def make(left: dict[str, float], *, limit: int = 3, flavour: str = "sync"):
    app = Continuum(bucket="unused", queue_url="unused")
    calls: list[str] = []

    def worked(i: int) -> int:
        calls.append(f"work{i}")
        return i * 10

    def ended(ctx: TaskContext[Count]) -> int | None:
        ctx.state.n += 1
        return ctx.state.n if ctx.turn + 1 >= limit else None

    if flavour == "sync":

        @app.step
        def work(i: int) -> int:
            return worked(i)

        @app.task(state=Count)
        def count(ctx: TaskContext[Count]) -> int | None:
            ctx.state.n += work(ctx.state.n)
            return ended(ctx)

    else:

        @app.step
        async def work(i: int) -> int:
            return worked(i)

        @app.task(state=Count)
        async def count(ctx: TaskContext[Count]) -> int | None:
            ctx.state.n += await work(ctx.state.n)
            return ended(ctx)

    record = TaskRecord(task_id="t", task_name="count", state={"n": 0})
    budget = Budget(remaining=lambda: left["s"], margin_s=0.0)
    return app.tasks["count"], record, budget, calls


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_runs_turns_to_the_result_in_memory(flavour):
    task, record, budget, calls = make({"s": 100.0}, flavour=flavour)
    outcome = TurnLoop(
        task, record, budget, save=lambda: None, settings=Settings(persist_every_s=60)
    ).run()
    assert isinstance(outcome, Returned)
    assert record.result == 133  # n: 0 -> 1 -> 12 -> 133 (n += 10n + 1 each turn)
    assert calls == ["work0", "work1", "work12"]
    assert record.turn == 2
    assert record.counters.steps_executed == 3


def test_suspends_before_a_step_that_will_not_fit_after_progress():
    left = {"s": 100.0}
    task, record, budget, calls = make(left)
    record.invocation_budget_s = 100.0
    record.step_stats["work"] = StepStats()
    for _ in range(5):
        observe(record.step_stats["work"], 0.4)
    loop = TurnLoop(task, record, budget, save=lambda: None, settings=Settings(persist_every_s=60))
    real_call_step = loop.runner.call_step

    def squeeze(*args):
        value = real_call_step(*args)
        left["s"] = 0.5  # enough to save, not enough for another 0.4 s step and its save
        return value

    loop.runner.call_step = squeeze
    outcome = loop.run()
    assert isinstance(outcome, Suspended)
    assert "step 'work' expects up to" in outcome.reason
    assert calls == ["work0"]
    assert record.turn == 1
    assert record.journal == []

    left["s"] = 0.1  # not even enough to save after a turn: stop at the turn boundary
    record = TaskRecord(task_id="t", task_name="count", state={"n": 0})
    loop = TurnLoop(task, record, budget, save=lambda: None, settings=Settings(persist_every_s=60))
    left["s"] = 100.0
    second_call_step = loop.runner.call_step
    loop.runner.call_step = lambda *a: (second_call_step(*a), left.update(s=0.1))[0]
    assert loop.run().reason == "no time left for another turn"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_without_progress_suspends_only_when_a_fresh_invocation_would_fit(flavour):
    task, record, budget, calls = make({"s": 0.01}, flavour=flavour)
    record.step_stats["work"] = StepStats()
    for _ in range(5):
        observe(record.step_stats["work"], 0.5)
    record.invocation_budget_s = 10.0
    outcome = TurnLoop(
        task, record, budget, save=lambda: None, settings=Settings(persist_every_s=60)
    ).run()
    assert isinstance(outcome, Suspended)
    assert "fresh invocation" in outcome.reason
    assert calls == []

    # The previous invocation already suspended idle: run the step rather than loop.
    record.idle_suspensions = 1
    outcome = TurnLoop(
        task, record, budget, save=lambda: None, settings=Settings(persist_every_s=60)
    ).run()
    assert calls[0] == "work0"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_that_never_fits_runs_rather_than_loops(flavour):
    task, record, budget, calls = make({"s": 0.01}, flavour=flavour)
    record.invocation_budget_s = 0.01  # no invocation ever has the time
    TurnLoop(task, record, budget, save=lambda: None, settings=Settings(persist_every_s=60)).run()
    assert calls[:1] == ["work0"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_user_except_exception_cannot_swallow_a_suspension(flavour):
    app = Continuum(bucket="unused", queue_url="unused")
    left = {"s": 100.0}

    def ticked() -> int:
        left["s"] = 0.0
        return 1

    if flavour == "sync":

        @app.step
        def tick() -> int:
            return ticked()

        @app.task(state=Count)
        def stubborn(ctx: TaskContext[Count]) -> int | None:
            for _ in range(3):
                try:
                    ctx.state.n += tick()
                except Exception:  # a user's broad handler
                    return -1
            return ctx.state.n

    else:

        @app.step
        async def tick() -> int:
            return ticked()

        @app.task(state=Count)
        async def stubborn(ctx: TaskContext[Count]) -> int | None:
            for _ in range(3):
                try:
                    ctx.state.n += await tick()
                except Exception:  # a user's broad handler
                    return -1
            return ctx.state.n

    record = TaskRecord(task_id="t", task_name="stubborn", state={"n": 0})
    budget = Budget(remaining=lambda: left["s"], margin_s=0.0)
    outcome = TurnLoop(
        app.tasks["stubborn"], record, budget, lambda: None, Settings(persist_every_s=60)
    ).run()
    assert isinstance(outcome, Suspended)
    assert record.result is None


def test_persists_after_an_effect_step_and_by_interval():
    app = Continuum(bucket="unused", queue_url="unused")
    saves: list[int] = []

    @app.step(effect=True)
    def send_email(i: int) -> str:
        return f"sent {i}"

    @app.step
    def think(i: int) -> int:
        return i

    @app.task(state=Count)
    def mailer(ctx: TaskContext[Count]) -> int | None:
        think(1)
        send_email(1)
        think(2)
        return 1

    record = TaskRecord(task_id="t", task_name="mailer", state={"n": 0})
    budget = Budget(remaining=lambda: 100.0)
    loop = TurnLoop(
        app.tasks["mailer"],
        record,
        budget,
        lambda: saves.append(len(record.journal)),
        Settings(persist_every_s=60),
    )
    assert isinstance(loop.run(), Returned)
    assert saves == [2]  # right after the effect, with it in the journal

    record = TaskRecord(task_id="t", task_name="mailer", state={"n": 0})
    saves.clear()
    loop = TurnLoop(
        app.tasks["mailer"],
        record,
        budget,
        lambda: saves.append(len(record.journal)),
        Settings(persist_every_s=0),
    )
    loop.run()
    assert saves == [1, 2, 3]  # persist_every_s=0: after every step


def test_a_step_resumed_in_its_backoff_logs_its_start_after_the_backoff():
    """A retry resumed in a fresh invocation sleeps out the rest of
    its backoff here when it fits; the history logged the time before that sleep as the
    attempt's start."""
    app = Continuum(bucket="unused", queue_url="unused")
    ran_at: list[float] = []

    @app.step(retries=2, backoff_s=0.4)
    def flaky() -> int:
        ran_at.append(time.time())
        return 7

    @app.task(state=Count)
    def job(ctx: TaskContext[Count]) -> int:
        return flaky()

    record = TaskRecord(task_id="t", task_name="job", state={"n": 0})
    record.journal.append(  # the first attempt failed in an earlier invocation
        JournalEntry(
            "flaky#0",
            "flaky",
            ok=False,
            partial=True,
            error=ErrorInfo(type="ConnectionError", message="x"),
            attempts=1,
            retry_at=time.time() + 0.4,
        )
    )
    run = InvocationRun(
        number=1, generation=1, message="resume", started_at=datetime.now(UTC), turn=0
    )
    budget = Budget(remaining=lambda: 100.0, margin_s=0.0)
    loop = TurnLoop(
        app.tasks["job"], record, budget, lambda: None, Settings(persist_every_s=60), invocation=run
    )
    assert isinstance(loop.run(), Returned)
    [step] = run.steps
    assert step.outcome == "ok"
    assert abs(step.started - ran_at[0]) < 0.1, (step.started, ran_at[0])
