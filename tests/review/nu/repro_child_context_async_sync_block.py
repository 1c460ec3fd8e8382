"""In an async task, a block (or map item) that is a plain `def` journals its steps in the
task's own journal instead of the block's; the next turn then fails with a
NonDeterminismError the user cannot explain. An `async def` block works, and so does the
plain `ctx.child_context` with the same sync block; `check_replay_safe` does not flag it.

Run: python repro_child_context_async_sync_block.py
"""

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner, check_replay_safe

app = Continuum()


class S(BaseModel):
    item: str


@app.step
def weigh(item: str) -> int:
    return len(item)


def pack(ctx: TaskContext[S], item: str) -> int:  # a plain def block, as docs/fan-out.md shows
    return weigh(item)


async def pack_async(ctx: TaskContext[S], item: str) -> int:
    return weigh(item)


def pack_item(ctx: TaskContext[S], item: str, index: int) -> int:
    return weigh(item)


@app.task(state=S)
async def with_sync_block(ctx: TaskContext[S]) -> int:
    n = await ctx.child_context_async(pack, ctx.state.item, name="pack")
    await ctx.sleep_async(3600)  # a second invocation replays the turn
    return n


@app.task(state=S)
async def with_async_block(ctx: TaskContext[S]) -> int:
    n = await ctx.child_context_async(pack_async, ctx.state.item, name="pack")
    await ctx.sleep_async(3600)
    return n


@app.task(state=S)
async def with_plain_child_context(ctx: TaskContext[S]) -> int:
    n = ctx.child_context(pack, ctx.state.item, name="pack")  # "the plain forms run too"
    await ctx.sleep_async(3600)
    return n


@app.task(state=S)
async def with_map_async(ctx: TaskContext[S]) -> int:
    batch = await ctx.map_async([ctx.state.item], pack_item)
    await ctx.sleep_async(3600)
    return sum(batch.values())


with TaskRunner(app) as runner:
    names = ("with_sync_block", "with_async_block", "with_plain_child_context", "with_map_async")
    for name in names:
        task = runner.run(name, {"item": "kayak"})
        keys = [entry.key for entry in task.record.journal]
        print(f"{name}: {task.status.value}; top-level journal {keys}")
        if task.error:
            print(f"    {task.error.type}: {task.error.message}")

# check_replay_safe does not raise: its first run fails (NonDeterminismError) and so do its replays.
report = check_replay_safe(app, with_sync_block, {"item": "kayak"})
print(f"check_replay_safe(with_sync_block) returned, report.status={report.status.value}")
