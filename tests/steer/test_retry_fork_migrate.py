"""Retry a failed task after a fix, fork one from a past checkpoint, migrate old states."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import Continuum, ContinuumError, Status, TaskContext
from tests.support import inspect_task


class Order(BaseModel):
    items: list[str] = ["a", "b", "c"]
    packed: list[str] = []


def shop(*, broken: set[str]) -> tuple[Continuum, list[str]]:
    app = Continuum()
    ran: list[str] = []

    @app.step
    def pack(item: str) -> str:
        ran.append(item)
        if item in broken:
            raise ValueError(f"cannot pack {item}")
        return item.upper()

    @app.task(state=Order)
    def fulfil(ctx: TaskContext[Order]) -> list[str]:
        return [pack(item) for item in ctx.state.items]  # one turn: a, b, c

    return app, ran


def test_retry_runs_the_failed_turn_again_keeping_the_steps_it_recorded(make_runtime):
    app, ran = shop(broken={"b"})
    runtime = make_runtime(app)
    with runtime.time.running():
        failed = runtime.run("fulfil", {})
        assert failed.status == "failed"
        assert ran == ["a", "b"]
        generation = runtime.record(failed.task_id).generation
        fixed, again = shop(broken=set())  # the fix, deployed
        app.registry.steps["pack"].fn = fixed.registry.steps["pack"].fn
        assert app.client().retry(failed.task_id) == generation + 1
        done = runtime.drive(failed.task_id)
    assert done.status == "succeeded"
    assert done.result == ["A", "B", "C"]
    assert again == ["b", "c"]  # a was recorded: it did not run again


def test_retry_refuses_a_task_that_did_not_fail(make_runtime):
    app, _ = shop(broken=set())
    runtime = make_runtime(app)
    with runtime.time.running():
        done = runtime.run("fulfil", {})
        with pytest.raises(
            ContinuumError, match="retry takes a failed task; this one is succeeded"
        ):
            app.client().retry(done.task_id)


def test_fork_starts_a_new_task_from_a_past_checkpoint(make_runtime):
    app = Continuum(default_step_s=0.01, safety_margin_s=0.0)
    ran: list[int] = []

    @app.step
    def count(i: int) -> int:
        ran.append(i)
        return i

    @app.task(state=Order)
    def counter(ctx: TaskContext[Order]) -> list[str] | None:
        ctx.state.packed.append(str(count(len(ctx.state.packed))))
        return ctx.state.packed if len(ctx.state.packed) >= 5 else None

    runtime = make_runtime(app, budget_s=0.0001)  # a checkpoint after each turn
    with runtime.time.running():
        done = runtime.run("counter", {})
        view = inspect_task(runtime.observer, done.task_id)
        middle = next(c for c in view.checkpoints if c.status == "suspended" and c.turn == 2)
        ran.clear()
        app.client().fork(done.task_id, version=middle.version_id, new_id="what-if")
        forked = runtime.drive("what-if")
    assert forked.status == "succeeded"
    assert forked.result == ["0", "1", "2", "3", "4"]
    assert ran == [2, 3, 4]  # from turn 2 on
    record = runtime.record("what-if")
    assert record.forked_from == done.task_id
    with runtime.time.running(), pytest.raises(ContinuumError, match="taken"):
        app.client().fork(done.task_id, version="latest", new_id="what-if")
    with runtime.time.running(), pytest.raises(ContinuumError, match="no version ''"):
        app.client().fork(done.task_id, version="", new_id="from-nothing")  # not the latest


def test_an_older_state_is_migrated_in_order_and_a_newer_one_is_left_alone(make_runtime):
    v1 = Continuum()

    @v1.task(state=Order)
    def fulfil(ctx: TaskContext[Order]) -> None:
        ctx.state.packed.append("turn")  # then the invocation's time is up: between turns

    class OrderV3(BaseModel):
        lines: list[dict[str, str]]
        note: str

    v3 = Continuum()

    @v3.task(
        state=OrderV3,
        name="fulfil",
        version=3,
        migrations={
            1: lambda s: {"lines": [{"sku": i} for i in s["items"]]},
            2: lambda s: {**s, "note": "migrated"},
        },
    )
    def fulfil_v3(ctx: TaskContext[OrderV3]) -> str:
        return f"{len(ctx.state.lines)} lines, {ctx.state.note}"

    runtime = make_runtime(v1, budget_s=0.0001)
    with runtime.time.running():
        task_id = v1.client().start("fulfil", {})
        runtime.invoke_once()
        assert runtime.record(task_id).status == Status.SUSPENDED
        runtime.app = v3  # a deploy of version 3 while the task is suspended
        runtime.budget_s = 5
        v3.configure(store=v1.records.store, queue=v1.continuations.queue)
        done = runtime.drive(task_id)
    assert (done.status, done.error) == ("succeeded", None)
    assert done.result == "3 lines, migrated"
    assert runtime.record(task_id).state_version == 3


def test_a_state_saved_by_a_newer_version_is_left_untouched_and_comes_back(make_runtime):
    new = Continuum()

    @new.task(state=Order, name="fulfil", version=2, migrations={1: lambda s: s})
    def fulfil(ctx: TaskContext[Order]) -> str:
        ctx.sleep(60)
        return "new code ran"

    old = Continuum()

    @old.task(state=Order, name="fulfil")
    def fulfil_old(ctx: TaskContext[Order]) -> str:
        return "old code ran"

    runtime = make_runtime(new)
    with runtime.time.running():
        task_id = new.client().start("fulfil", {})
        runtime.invoke_once()
        before = runtime.observer_store.get(f"tasks/{task_id}/record.json").etag
        runtime.app = old  # a rollback
        old.configure(store=new.records.store, queue=new.continuations.queue)
        runtime.time.advance(61)
        runtime.invoke_once()
        after = runtime.observer_store.get(f"tasks/{task_id}/record.json").etag
        assert before == after  # untouched
        assert runtime.next_due() is not None  # its message comes back for a newer worker
        runtime.app = new  # rolled forward again
        runtime.time.advance(900)
        done = runtime.drive(task_id)
    assert done.status == "succeeded"
