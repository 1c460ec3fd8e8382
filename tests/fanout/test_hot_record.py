"""No hot record: a parent's fan-in of N children costs it O(1) record writes and
invocations, whatever N, with or without ``max_concurrency`` refills; a batch its policy cuts
short costs O(N) messages, not O(N^2).

The writes are counted on the parent's record key, at the app's store (so on both backends);
the messages at the app's queue.

Every test runs in both flavours (``tests/flavours.py``): the async twin's parent awaits
``map_tasks_async`` and its children await their ``async def`` step.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import BatchResult, Completion, Continuum, Status, TaskContext
from tests.conftest import StoreFaults
from tests.fanout.kit import message_of, record_key, runtime_on, settle
from tests.flavours import FLAVOURS


class Wide(BaseModel):
    n: int
    max_concurrency: int | None = None
    fail_fast: bool = False


class One(BaseModel):
    i: int


def wide_app(flavour: str = "sync") -> Continuum:
    app = Continuum()

    def squared(i: int) -> int:
        if i == 1:
            raise ValueError("one fails")
        return i * i

    def batch_of(ctx: TaskContext[Wide]) -> dict[str, Any]:
        s = ctx.state
        name, completion = (
            ("flaky", Completion(tolerated_failure_count=0)) if s.fail_fast else ("one", None)
        )
        return {
            "task_name": name,
            "inputs": [One(i=i) for i in range(s.n)],
            "max_concurrency": s.max_concurrency,
            "completion": completion,
        }

    def summary(batch: BatchResult) -> dict[str, Any]:
        return {"count": batch.total_count, "sum": sum(item.result or 0 for item in batch.items)}

    if flavour == "sync":

        @app.step
        def square(i: int) -> int:
            return squared(i)

        @app.task(state=One)
        def one(ctx: TaskContext[One]) -> int:
            return square(ctx.state.i) if ctx.state.i != 1 else 1

        @app.task(state=One)
        def flaky(ctx: TaskContext[One]) -> int:
            return square(ctx.state.i)

        @app.task(state=Wide)
        def wide(ctx: TaskContext[Wide]) -> dict[str, Any]:
            return summary(ctx.map_tasks(**batch_of(ctx)))

    else:

        @app.step
        async def square(i: int) -> int:
            return squared(i)

        @app.task(state=One)
        async def one(ctx: TaskContext[One]) -> int:
            return await square(ctx.state.i) if ctx.state.i != 1 else 1

        @app.task(state=One)
        async def flaky(ctx: TaskContext[One]) -> int:
            return await square(ctx.state.i)

        @app.task(state=Wide)
        async def wide(ctx: TaskContext[Wide]) -> dict[str, Any]:
            return summary(await ctx.map_tasks_async(**batch_of(ctx)))

    return app


def fan_in(where: str, plan: Wide, flavour: str = "sync") -> dict[str, Any]:
    app = wide_app(flavour)
    with runtime_on(where, app) as runtime, runtime.time.running():
        puts: Counter[str] = Counter()
        sends: Counter[str] = Counter()

        def count_put(call: Any, key: str, *args: Any, **kwargs: Any) -> Any:
            puts[key] += 1
            return call(key, *args, **kwargs)

        StoreFaults(app).around("put", count_put)
        queue = app.continuations.queue
        send = queue.send

        def count_send(body: str, *, delay_s: int = 0) -> str:
            sends[message_of(body)["task_id"]] += 1
            return send(body, delay_s=delay_s)

        queue.send = count_send
        task_id = app.client().start("wide", plan)
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    return {
        "result": done.result,
        "record_puts": puts[record_key(task_id)],
        "invocations": done.counters.invocations,
        "messages": sum(sends.values()),
        "to_parent": sends[task_id],
    }


SIZES = {"memory": (20, 60), "moto": (4, 12)}  # fewer on moto: each call is slow there


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("max_concurrency", [None, 4])
@pytest.mark.parametrize("where", ["memory", "moto"])
def test_the_parents_record_writes_and_invocations_do_not_grow_with_its_children(
    where, max_concurrency, flavour
):
    small, large = (
        fan_in(where, Wide(n=n, max_concurrency=max_concurrency), flavour) for n in SIZES[where]
    )
    for n, run in zip(SIZES[where], (small, large), strict=True):
        assert run["result"] == {"count": n, "sum": sum(i * i for i in range(n) if i != 1) + 1}
    assert small["record_puts"] == large["record_puts"] <= 6
    assert small["invocations"] == large["invocations"] <= 3


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("n", [20, 60])
def test_a_fail_fast_batch_sends_messages_linear_in_its_children(n, flavour):
    """Child 1 fails; the parent cancels the rest, which were pending behind max_concurrency=1.
    Each cancelled child must not pass on every message it gets to its successor."""
    run = fan_in("memory", Wide(n=n, max_concurrency=1, fail_fast=True), flavour)
    assert run["result"] == {"count": 2, "sum": 0}
    assert run["messages"] <= 5 * n
    assert run["to_parent"] <= 3 * n
    assert run["record_puts"] <= 6
