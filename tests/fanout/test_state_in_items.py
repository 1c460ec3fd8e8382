"""The state is the task's: a branch, an item or a block that changes it is refused.

A finished item or block does not run on replay, so a change it made to ``ctx.state`` would
be lost after any suspension later in the turn; the change fails the task at once instead,
naming the batch or block, and the same code that only reads the state runs as before.

Every test runs in both flavours (``tests/flavours.py``): the async twin's items, branches
and block are ``async def``, in ``map_async``, ``parallel_async`` and
``child_context_async``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, ContinuumError, Status, TaskContext
from tests.fanout.kit import runtime_on, settle
from tests.flavours import FLAVOURS


class Seen(BaseModel):
    api: str
    write: bool = True
    seen: list[int] = []


def writing_app(flavour: str = "sync") -> Continuum:
    app = Continuum()
    xs = [10, 20, 30, 40]

    if flavour == "sync":

        @app.step
        def work(x: int) -> int:
            return x

        def touch(ctx: TaskContext[Seen], x: int) -> int:
            if ctx.state.write:
                ctx.state.seen.append(x)
            if x == 30:
                ctx.sleep(60)  # a suspension after the other items finished
            return work(x) + len(ctx.state.seen) * 0

        def item(ctx: TaskContext[Seen], x: int, index: int) -> int:
            return touch(ctx, x)

        def block(ctx: TaskContext[Seen]) -> list[int]:
            return [touch(ctx, x) for x in xs]

        @app.task(state=Seen)
        def gather(ctx: TaskContext[Seen]) -> Any:
            try:
                if ctx.state.api == "map":
                    values = ctx.map(xs, item).values()
                elif ctx.state.api == "parallel":
                    values = ctx.parallel([lambda c, x=x: touch(c, x) for x in xs]).values()
                else:
                    values = ctx.child_context(block, name="block")
            except ContinuumError as exc:
                return {"refused": str(exc)}
            return {"values": values, "seen": ctx.state.seen}

    else:

        @app.step
        async def work(x: int) -> int:
            return x

        async def touch(ctx: TaskContext[Seen], x: int) -> int:
            if ctx.state.write:
                ctx.state.seen.append(x)
            if x == 30:
                await ctx.sleep_async(60)  # a suspension after the other items finished
            return await work(x) + len(ctx.state.seen) * 0

        async def item(ctx: TaskContext[Seen], x: int, index: int) -> int:
            return await touch(ctx, x)

        async def block(ctx: TaskContext[Seen]) -> list[int]:
            return [await touch(ctx, x) for x in xs]

        @app.task(state=Seen)
        async def gather(ctx: TaskContext[Seen]) -> Any:
            try:
                if ctx.state.api == "map":
                    values = (await ctx.map_async(xs, item)).values()
                elif ctx.state.api == "parallel":
                    branches = [lambda c, x=x: touch(c, x) for x in xs]
                    values = (await ctx.parallel_async(branches)).values()
                else:
                    values = await ctx.child_context_async(block, name="block")
            except ContinuumError as exc:
                return {"refused": str(exc)}
            return {"values": values, "seen": ctx.state.seen}

    return app


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("api", ["map", "parallel", "child_context"])
def test_a_state_change_inside_an_item_or_block_is_refused_naming_it(backend, api, flavour):
    app = writing_app(flavour)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("gather", Seen(api=api))
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    refused = done.result["refused"]
    assert "ctx.state changed inside" in refused
    assert task_id in refused
    assert ("block" if api == "child_context" else api if api == "parallel" else "item") in refused


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("api", ["map", "parallel", "child_context"])
def test_items_and_blocks_that_only_read_the_state_run_as_before(api, flavour):
    app = writing_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        task_id = app.client().start("gather", Seen(api=api, write=False))
        settle(runtime)
        done = runtime.record(task_id)
    assert (done.status, done.result) == (
        Status.SUCCEEDED,
        {"values": [10, 20, 30, 40], "seen": []},
    )
