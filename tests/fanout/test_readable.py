"""A person reading a waiting parent's record.json (``aws s3 cp … -``) sees which items
finished, with their results, and which are still running, and what they wait for; and
``status`` shows a parent's child tasks by outcome.

Both tests run in both flavours (``tests/flavours.py``): an async task's record reads the
same.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import raw_record
from tests.fanout.kit import runtime_on, settle
from tests.flavours import FLAVOURS


class Four(BaseModel):
    n: int = 4


class Nap(BaseModel):
    i: int


def readable_app(flavour: str = "sync") -> Continuum:
    app = Continuum()

    if flavour == "sync":

        @app.step
        def work(i: int) -> int:
            return i * 10

        def item(ctx: TaskContext[Four], value: int, index: int) -> int:
            done = work(value)
            if index >= 2:
                ctx.sleep(3600)  # items 2 and 3 are still running when the task waits
            return done

        @app.task(state=Four)
        def items(ctx: TaskContext[Four]) -> list[int]:
            return ctx.map(range(ctx.state.n), item, name="pages").values()

        @app.task(state=Nap)
        def nap(ctx: TaskContext[Nap]) -> int:
            if ctx.state.i == 1:
                raise ValueError("child 1 fails")
            if ctx.state.i >= 2:
                ctx.sleep(3600)
            return ctx.state.i

        @app.task(state=Four)
        def tasks(ctx: TaskContext[Four]) -> int:
            return ctx.map_tasks("nap", [Nap(i=i) for i in range(ctx.state.n)]).success_count

    else:

        @app.step
        async def work(i: int) -> int:
            return i * 10

        async def page(ctx: TaskContext[Four], value: int, index: int) -> int:
            done = await work(value)
            if index >= 2:
                await ctx.sleep_async(3600)  # items 2 and 3 are still running when it waits
            return done

        @app.task(state=Four)
        async def items(ctx: TaskContext[Four]) -> list[int]:
            return (await ctx.map_async(range(ctx.state.n), page, name="pages")).values()

        @app.task(state=Nap)
        async def nap(ctx: TaskContext[Nap]) -> int:
            if ctx.state.i == 1:
                raise ValueError("child 1 fails")
            if ctx.state.i >= 2:
                await ctx.sleep_async(3600)
            return ctx.state.i

        @app.task(state=Four)
        async def tasks(ctx: TaskContext[Four]) -> int:
            naps = [Nap(i=i) for i in range(ctx.state.n)]
            return (await ctx.map_tasks_async("nap", naps)).success_count

    return app


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_record_json_shows_which_items_finished_and_which_are_running(backend, flavour):
    app = readable_app(flavour)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("items", Four())
        runtime.invoke_once()
        raw = raw_record(runtime, task_id)
        settle(runtime)
        assert runtime.record(task_id).result == [0, 10, 20, 30]
    text = json.dumps(raw)  # it is plain JSON, no blob needed to read it
    assert raw["status"] == "waiting"
    [batch] = raw["journal"]
    assert (batch["key"], batch["kind"], batch["partial"]) == ("pages#0", "batch", True)
    by_index = {child["key"]: child for child in batch["children"]}
    assert sorted(by_index) == ["0", "1", "2", "3"]
    for finished in ("0", "1"):  # finished: its result, no partial flag, no inner journal
        assert by_index[finished]["result"] == int(finished) * 10
        assert "partial" not in by_index[finished]
        assert "children" not in by_index[finished]
    for running in ("2", "3"):  # running: partial, and its own journal says where it is
        entry = by_index[running]
        assert entry["partial"] is True
        inner = [(c["key"], c.get("partial", False)) for c in entry["children"]]
        assert inner == [("work#0", False), ("sleep#1", True)]
    assert [w["kind"] for w in raw["waiting_for"]] == ["time", "time"]
    assert "pages#0" in text


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_parents_record_and_status_show_its_child_tasks_by_outcome(flavour):
    app = readable_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        task_id = app.client().start("tasks", Four())
        while runtime.invoke_once() is not None:  # everything but the sleeps' ends
            pass
        raw = raw_record(runtime, task_id)
        status = app.client().status(task_id)
        settle(runtime)
        done = runtime.record(task_id)
    assert raw["status"] == "waiting"
    [batch] = raw["children"]
    assert (batch["task_name"], batch["count"]) == ("nap", 4)
    [entry] = raw["journal"]
    assert (entry["kind"], entry["partial"], entry["ref"]) == ("children", True, batch["prefix"])
    [waiter] = raw["waiting_for"]
    assert (waiter["kind"], waiter["id"], waiter["count"]) == ("child", batch["prefix"], 4)
    assert status.children is not None
    summary = status.children
    assert (summary.total, summary.succeeded, summary.failed, summary.unfinished) == (4, 1, 1, 2)
    assert summary.failed_ids == [f"{batch['prefix']}.1"]
    assert done.status == Status.SUCCEEDED
    assert done.result == 3
