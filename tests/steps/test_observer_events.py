"""The observer events carry what tracing needs: waits and child contexts start and end, a
step's start says whether an earlier invocation began it, its end carries its result or its
error and its times, invocations their request id and the task's creation time.

Child contexts, batches and their items run in both flavours (``tests/flavours.py``): an async
task's ``child_context_async`` and ``map_async`` emit the same events.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._define.events import (
    ContextEnded,
    ContextStarted,
    InvocationEnded,
    InvocationStarted,
    StepEnded,
    StepStarted,
    TaskFinished,
    WaitEnded,
    WaitStarted,
)
from continuum.testing import TaskRunner
from tests.flavours import FLAVOURS
from tests.observers.recorder import Recorder


class Plan(BaseModel):
    items: list[int] = [1, 2, 3]


def test_waits_start_once_and_end_when_answered_with_their_real_duration():
    app, seen = Continuum(), Recorder()
    app.observe(seen)

    @app.task(state=Plan)
    def patient(ctx: TaskContext[Plan]) -> Any:
        ctx.sleep(3600, name="nap")
        cb = ctx.create_callback("approval")
        answer = cb.result()
        signal = ctx.wait_for_signal("go")
        return [answer, signal.payload if signal else None]

    with TaskRunner(app, budget_s=30) as runner:
        task = runner.run("patient", {})
        task.callback("approval").complete("yes")
        task.signal("go", 7)
        task.run_until_done()
        assert task.result == ["yes", 7]
    started = [(e.kind, e.name, e.key) for e in seen.of(WaitStarted)]
    ended = [(e.kind, e.name, e.key, e.outcome) for e in seen.of(WaitEnded)]
    assert started == [
        ("sleep", "nap", "nap#0"),
        ("callback", "approval", "approval.result#2"),
        ("signal", "signal.go", "signal.go#3"),
    ]
    assert ended == [(*s, "ok") for s in started]
    nap = seen.of(WaitEnded)[0]
    assert 3600 <= nap.ended_at - nap.started_at < 3700


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_child_contexts_batches_and_their_items_start_and_end(flavour):
    app, seen = Continuum(), Recorder()
    app.observe(seen)

    if flavour == "sync":

        @app.step
        def double(i: int) -> int:
            return 2 * i

        @app.task(state=Plan)
        def fan(ctx: TaskContext[Plan]) -> Any:
            block = ctx.child_context(lambda c: double(5), name="block")
            batch = ctx.map(ctx.state.items, lambda c, item, index: double(item), name="each")
            return [block, batch.values()]

    else:

        @app.step
        async def double(i: int) -> int:
            return 2 * i

        @app.task(state=Plan)
        async def fan(ctx: TaskContext[Plan]) -> Any:
            block = await ctx.child_context_async(lambda c: double(5), name="block")
            items = ctx.state.items
            batch = await ctx.map_async(items, lambda c, item, index: double(item), name="each")
            return [block, batch.values()]

    with TaskRunner(app) as runner:
        assert runner.run("fan", {}).result == [10, [2, 4, 6]]
    started = sorted((e.kind, e.path, e.index) for e in seen.of(ContextStarted))
    assert started == [
        ("batch", "each#1/", None),
        ("context", "block#0/", None),
        ("item", "each#1/0/", 0),
        ("item", "each#1/1/", 1),
        ("item", "each#1/2/", 2),
    ]
    ended = sorted((e.kind, e.path, e.outcome) for e in seen.of(ContextEnded))
    assert ended == [(k, p, "ok") for k, p, _ in started]
    paths = sorted(e.path for e in seen.of(StepEnded))
    assert paths == ["block#0/", "each#1/0/", "each#1/1/", "each#1/2/"]


def test_a_step_resumed_in_a_later_invocation_starts_as_a_replay_with_its_first_start():
    app, seen = Continuum(), Recorder()
    app.observe(seen)
    calls: list[int] = []

    @app.step(retries=1, backoff_s=600)
    def book() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("down")
        return "booked"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        return book()

    with TaskRunner(app, budget_s=30) as runner:
        task = runner.run("trip", {})
        assert task.result == "booked"
    first, second = seen.of(StepStarted)
    assert (first.replay, second.replay) == (False, True)
    assert second.first_started_at == first.started_at
    assert second.started_at - first.started_at >= 600
    failed, ok = seen.of(StepEnded)
    assert (failed.outcome, failed.error_type, failed.error) == ("retry", "ConnectionError", "down")
    assert (ok.outcome, ok.result, ok.error) == ("ok", "booked", None)
    assert ok.ended_at >= ok.started_at == second.started_at
    starts = seen.of(InvocationStarted)
    assert [s.number for s in starts] == [1, 2]
    assert all(s.request_id for s in starts)
    assert {s.created_at for s in starts} == {seen.of(TaskFinished)[0].created_at}
    ends = seen.of(InvocationEnded)
    assert [e.outcome for e in ends] == ["waiting", "succeeded"]  # waits for its backoff
    assert all(e.ended_at >= e.started_at > 0 for e in ends)


class Poll(BaseModel):
    target: int = 3


def test_a_condition_is_a_wait_from_its_first_check_to_the_check_that_holds():
    app, seen = Continuum(), Recorder()
    app.observe(seen)

    @app.step
    def bump(n: int) -> int:
        return n + 1

    @app.task(state=Poll)
    def polling(ctx: TaskContext[Poll]) -> Any:
        target = ctx.state.target
        return ctx.wait_for_condition(
            bump, initial=0, done=lambda n: n >= target, delay_s=3600, name="ready"
        )

    with TaskRunner(app, budget_s=30) as runner:
        assert runner.run("polling", {}).result == 3
    (start,) = seen.of(WaitStarted)[:1]
    conditions = [e for e in seen.of(WaitStarted) if e.kind == "condition"]
    assert [(e.name, e.key) for e in conditions] == [("ready", start.key)]
    (ended,) = [e for e in seen.of(WaitEnded) if e.kind == "condition"]
    assert (ended.name, ended.key, ended.outcome) == ("ready", start.key, "ok")
    assert ended.started_at == conditions[0].started_at
    assert 7200 <= ended.ended_at - ended.started_at < 7300  # two delays between three checks


def test_a_condition_that_never_holds_ends_failed():
    app, seen = Continuum(), Recorder()
    app.observe(seen)

    @app.step
    def same(n: int) -> int:
        return n

    @app.task(state=Poll)
    def hopeless(ctx: TaskContext[Poll]) -> Any:
        try:
            ctx.wait_for_condition(same, initial=0, done=bool, delay_s=60, max_attempts=2)
        except Exception as exc:
            return type(exc).__name__
        return None

    with TaskRunner(app, budget_s=30) as runner:
        assert runner.run("hopeless", {}).result == "ConditionNotMetError"
    (ended,) = [e for e in seen.of(WaitEnded) if e.kind == "condition"]
    assert ended.outcome == "failed"
    assert "did not hold after 2 checks" in (ended.error or "")
    assert len([e for e in seen.of(WaitStarted) if e.kind == "condition"]) == 1
