"""An asyncio task of asyncio's own coroutine (``Event.wait``, ``Queue.get``) runs no task code,
so it gets no child context: libraries make such tasks as their timing goes (pydantic-ai makes
one per wakeup while it waits for tool calls), and a replay, where steps return at once, makes
fewer of them than the live turn did."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner


class Empty(BaseModel):
    pass


def test_helper_tasks_made_per_wakeup_do_not_break_the_replay():
    app = Continuum()
    wakeups: list[int] = []

    @app.step
    async def fetch(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        return name.upper()

    @app.task(state=Empty)
    async def research(ctx: TaskContext[Empty]) -> list[str]:
        pending = {asyncio.ensure_future(fetch(n, d)) for n, d in (("a", 0.05), ("b", 0.5))}
        tick = asyncio.Event()
        woken = 0
        while pending:  # one Event.wait task per wakeup, as pydantic-ai's tool-call wait makes
            helper = asyncio.ensure_future(tick.wait())
            _, pending = await asyncio.wait({*pending, helper}, return_when=asyncio.FIRST_COMPLETED)
            helper.cancel()
            pending.discard(helper)
            woken += 1
        wakeups.append(woken)
        await ctx.wait_for_signal_async("go")
        return sorted([await fetch("c", 0), "A", "B"])

    with TaskRunner(app) as runner:
        task = runner.start("research", {})
        runner.drive(task.task_id)
        assert task.status == "waiting"
        task.signal("go", None)
        task.run_until_done()
        assert task.status == "succeeded", task.error
        assert task.result == ["A", "B", "C"]
    assert wakeups[0] == 2  # live: the two steps ended one after the other
    assert wakeups[-1] == 1  # replayed: both at once, one helper task fewer
