"""A plain ``def`` given to the ``_async`` fan-out of an async task (``child_context_async``,
``map_async``, ``parallel_async``) runs as the sync fan-out runs it: in its own child context,
its steps journaled in the block's (or item's) journal, so a later invocation replays the turn.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner, check_replay_safe


class Item(BaseModel):
    item: str


def plain_blocks_app() -> Continuum:
    app = Continuum()

    @app.step
    def weigh(item: str) -> int:
        return len(item)

    def pack(ctx: TaskContext[Item], item: str) -> int:
        return weigh(item)

    def pack_item(ctx: TaskContext[Item], item: str, index: int) -> int:
        return weigh(item) + index

    def pack_twice(ctx: TaskContext[Item]) -> int:
        return weigh(ctx.state.item) * 2

    def pack_over_a_sleep(ctx: TaskContext[Item], item: str) -> int:
        first = weigh(item)
        ctx.sleep(3600)  # the block is unfinished when the invocation ends
        return first + weigh(item + "s")

    @app.task(state=Item)
    async def waits_inside(ctx: TaskContext[Item]) -> int:
        return int(await ctx.child_context_async(pack_over_a_sleep, ctx.state.item, name="pack"))

    @app.task(state=Item)
    async def block(ctx: TaskContext[Item]) -> int:
        n = await ctx.child_context_async(pack, ctx.state.item, name="pack")
        await ctx.sleep_async(3600)  # the next invocation replays the turn
        return int(n)

    @app.task(state=Item)
    async def virtual_block(ctx: TaskContext[Item]) -> int:
        n = await ctx.child_context_async(pack, ctx.state.item, name="pack", virtual=True)
        await ctx.sleep_async(3600)
        return int(n)

    @app.task(state=Item)
    async def mapped(ctx: TaskContext[Item]) -> int:
        batch = await ctx.map_async([ctx.state.item, "oar"], pack_item, name="pack")
        await ctx.sleep_async(3600)
        return sum(batch.values())

    @app.task(state=Item)
    async def branches(ctx: TaskContext[Item]) -> list[Any]:
        batch = await ctx.parallel_async({"once": lambda c: pack(c, "oar"), "twice": pack_twice})
        await ctx.sleep_async(3600)
        return batch.values()

    return app


def run_twice(backend: str, task: str) -> tuple[Any, list[str], list[str]]:
    """Run ``task`` over its sleep (two invocations): its result, the keys of its journal, and
    the keys (with their paths) of the steps that ran live over both (none twice)."""
    with TaskRunner(plain_blocks_app(), backend=backend) as runner:  # type: ignore[arg-type]
        done = runner.run(task, {"item": "kayak"})
        assert done.status == "succeeded", done.error
        runs = done.record.history
        assert len(runs) == 2
        live = sorted(step.key for run in runs for step in run.steps)
        return done.result, [entry.key for entry in done.record.journal], live


def test_a_plain_def_block_in_child_context_async_journals_its_steps_in_the_block(backend):
    result, keys, live = run_twice(backend, "block")
    assert result == 5
    assert keys == ["pack#0", "sleep#1"]  # the finished block is one unit
    assert live == ["pack#0/weigh#0"]


def test_a_plain_def_block_that_waits_goes_on_in_the_next_invocation_replaying_its_steps(
    backend,
):
    result, keys, live = run_twice(backend, "waits_inside")
    assert result == 5 + 6
    assert keys == ["pack#0"]
    assert live == ["pack#0/weigh#0", "pack#0/weigh#2"]


def test_a_plain_def_virtual_block_keys_its_steps_under_its_name_and_replays_them(backend):
    result, keys, live = run_twice(backend, "virtual_block")
    assert result == 5
    assert keys == ["weigh#0", "sleep#1"]  # no entry of its own
    assert live == ["pack#0/weigh#0"]


def test_plain_def_items_of_map_async_journal_their_steps_in_their_items(backend):
    result, keys, live = run_twice(backend, "mapped")
    assert result == 5 + 3 + 1
    assert keys == ["pack#0", "sleep#1"]
    assert live == ["pack#0/0/weigh#0", "pack#0/1/weigh#0"]


def test_plain_def_branches_of_parallel_async_journal_their_steps_in_their_branches(backend):
    result, keys, live = run_twice(backend, "branches")
    assert result == [3, 10]
    assert keys == ["parallel#0", "sleep#1"]
    assert live == ["parallel#0/0/weigh#0", "parallel#0/1/weigh#0"]


def test_check_replay_safe_finds_an_async_task_with_plain_def_blocks_replay_safe():
    app = plain_blocks_app()
    for task in ("block", "waits_inside", "virtual_block", "mapped", "branches"):
        report = check_replay_safe(app, task, {"item": "kayak"})
        assert report.status == "succeeded", (task, report)
