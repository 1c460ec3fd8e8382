"""A batch that can decide does not wait for an item that is waiting.

In both flavours (``tests/flavours.py``): the async twin's item awaits a signal that never
comes, in ``map_async``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import BatchResult, Completion, Continuum, Status, TaskContext
from tests.fanout.kit import runtime_on, settle
from tests.flavours import FLAVOURS


class Three(BaseModel):
    n: int = 3


def waiting_item_app(flavour: str = "sync") -> Continuum:
    app = Continuum()
    completion = Completion(min_successful=2)

    def report(done: BatchResult) -> dict[str, Any]:
        return {
            "reason": done.completion_reason,
            "results": [one.result for one in done.succeeded()],
        }

    if flavour == "sync":

        @app.step
        def work(i: int) -> int:
            return i * 10

        def item(ctx: TaskContext[Three], i: int, index: int) -> int:
            if i == 0:
                return int(ctx.create_callback("never").result())
            return work(i)

        @app.task(state=Three)
        def decide(ctx: TaskContext[Three]) -> dict[str, Any]:
            return report(ctx.map(range(ctx.state.n), item, completion=completion))

    else:

        @app.step
        async def work(i: int) -> int:
            return i * 10

        async def waiting_item(ctx: TaskContext[Three], i: int, index: int) -> int:
            if i == 0:
                await ctx.wait_for_signal_async("never")
            return await work(i)

        @app.task(state=Three)
        async def decide(ctx: TaskContext[Three]) -> dict[str, Any]:
            n = ctx.state.n
            return report(await ctx.map_async(range(n), waiting_item, completion=completion))

    return app


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_map_that_reached_min_successful_does_not_wait_for_an_item_that_waits(backend, flavour):
    app = waiting_item_app(flavour)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("decide", Three())
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, (done.status, done.error)
    assert done.result == {"reason": "min_successful_reached", "results": [10, 20]}
