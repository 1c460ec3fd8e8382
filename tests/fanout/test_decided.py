"""A batch that can decide does not wait for an item that is waiting."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from continuum import Completion, Continuum, Status, TaskContext
from tests.fanout.kit import runtime_on, settle


class Three(BaseModel):
    n: int = 3


def waiting_item_app() -> Continuum:
    app = Continuum()

    @app.step
    def work(i: int) -> int:
        return i * 10

    def item(ctx: TaskContext[Three], i: int, index: int) -> int:
        if i == 0:
            return int(ctx.create_callback("never").result())
        return work(i)

    @app.task(state=Three)
    def decide(ctx: TaskContext[Three]) -> dict[str, Any]:
        done = ctx.map(range(ctx.state.n), item, completion=Completion(min_successful=2))
        return {
            "reason": done.completion_reason,
            "results": [one.result for one in done.succeeded()],
        }

    return app


def test_a_map_that_reached_min_successful_does_not_wait_for_an_item_that_waits(backend):
    app = waiting_item_app()
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("decide", Three())
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, (done.status, done.error)
    assert done.result == {"reason": "min_successful_reached", "results": [10, 20]}
