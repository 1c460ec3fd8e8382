"""Every completion policy, on ``ctx.map``, ``ctx.parallel`` and ``ctx.map_tasks``.

Ten items, one at a time (``max_concurrency=1``), so which items start is exact: an item
starts only while the policy has not decided. Each item is one step, ``work(i)``, that fails
for the indexes the case names; the test counts the steps that really ran. Every case runs on
the in-memory fakes; moto (slow per call) runs one case per API, a failing one.

Then what a batch refuses before anything runs (``max_concurrency``), and the empty batch.

Every test runs in both flavours (``tests/flavours.py``): a sync task with ``ctx.map``,
``ctx.parallel`` and ``ctx.map_tasks``, and its async twin with ``map_async``,
``parallel_async`` and ``map_tasks_async`` over ``async def`` items, branches, steps and
child tasks.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import (
    BatchError,
    BatchResult,
    Completion,
    ConfigurationError,
    Continuum,
    Status,
    TaskContext,
)
from tests.fanout.kit import children_of, runtime_on, settle
from tests.flavours import FLAVOURS

ITEMS = 10


class Plan(BaseModel):
    api: str
    fail: list[int] = []
    completion: dict[str, Any] | None = None


class Item(BaseModel):
    i: int
    fail: list[int] = []


@dataclass(frozen=True)
class Case:
    completion: Completion | None
    fail: tuple[int, ...]
    started: int  # items 0 .. started-1 start, the rest never do
    status: str
    reason: str


CASES = {
    "all succeed": Case(None, (), ITEMS, "succeeded", "all_completed"),
    "fail-fast": Case(
        Completion(tolerated_failure_count=0), (2,), 3, "failed", "failure_tolerance_exceeded"
    ),
    "failures within tolerance": Case(
        Completion(tolerated_failure_count=2, tolerated_failure_percentage=30),
        (2, 5),
        ITEMS,
        "failed",  # any item failed: the tolerance decides only when to stop starting items
        "all_completed",
    ),
    "tolerance exceeded by count": Case(
        Completion(tolerated_failure_count=1), (2, 5, 7), 6, "failed", "failure_tolerance_exceeded"
    ),
    "tolerance exceeded by percentage": Case(
        Completion(tolerated_failure_percentage=20),
        (1, 4, 6, 8),
        7,
        "failed",
        "failure_tolerance_exceeded",
    ),
    "min_successful reached early": Case(
        Completion(min_successful=3), (1,), 4, "failed", "min_successful_reached"
    ),
    "min_successful reached with no failure": Case(
        Completion(min_successful=3), (), 3, "succeeded", "min_successful_reached"
    ),
    "min_successful not reached": Case(
        Completion(min_successful=8), (0, 4, 9), ITEMS, "failed", "all_completed"
    ),
}


def policy_app(flavour: str = "sync") -> tuple[Continuum, Counter[int]]:
    app = Continuum()
    ran: Counter[int] = Counter()

    def report(result: BatchResult) -> dict[str, Any]:
        try:
            values: Any = result.values()
        except BatchError as exc:
            values = {"batch_error": [index for index, _ in exc.failures]}
        return {
            "values": values,
            "status": result.status,
            "reason": result.completion_reason,
            "started": [item.index for item in result.items],
            "failed": [item.index for item in result.failed()],
            "results": [item.result for item in result.succeeded()],
            "counts": [result.success_count, result.failure_count, result.total_count],
            "has_failure": result.has_failure,
        }

    def completion_of(plan: Plan) -> Completion | None:
        return Completion(**plan.completion) if plan.completion is not None else None

    if flavour == "sync":

        @app.step
        def work(i: int, fail: bool) -> int:
            ran[i] += 1
            if fail:
                raise ValueError(f"item {i} failed")
            return i * 10

        def one_item(ctx: TaskContext[Plan], i: int, index: int) -> int:
            return work(i, i in ctx.state.fail)

        def branch(i: int, ctx: TaskContext[Plan]) -> int:
            return work(i, i in ctx.state.fail)

        @app.task(state=Item)
        def item(ctx: TaskContext[Item]) -> int:
            return work(ctx.state.i, ctx.state.i in ctx.state.fail)

        @app.task(state=Plan)
        def batch(ctx: TaskContext[Plan]) -> dict[str, Any]:
            plan, completion = ctx.state, completion_of(ctx.state)
            result: BatchResult
            if plan.api == "map":
                result = ctx.map(range(ITEMS), one_item, max_concurrency=1, completion=completion)
            elif plan.api == "parallel":
                branches = [functools.partial(branch, i) for i in range(ITEMS)]
                result = ctx.parallel(branches, max_concurrency=1, completion=completion)
            else:
                inputs = [Item(i=i, fail=plan.fail) for i in range(ITEMS)]
                result = ctx.map_tasks("item", inputs, max_concurrency=1, completion=completion)
            return report(result)

    else:

        @app.step
        async def work(i: int, fail: bool) -> int:
            ran[i] += 1
            if fail:
                raise ValueError(f"item {i} failed")
            return i * 10

        async def one_item(ctx: TaskContext[Plan], i: int, index: int) -> int:
            return await work(i, i in ctx.state.fail)

        async def branch(i: int, ctx: TaskContext[Plan]) -> int:
            return await work(i, i in ctx.state.fail)

        @app.task(state=Item)
        async def item(ctx: TaskContext[Item]) -> int:
            return await work(ctx.state.i, ctx.state.i in ctx.state.fail)

        @app.task(state=Plan)
        async def batch(ctx: TaskContext[Plan]) -> dict[str, Any]:
            plan, completion = ctx.state, completion_of(ctx.state)
            result: BatchResult
            if plan.api == "map":
                result = await ctx.map_async(
                    range(ITEMS), one_item, max_concurrency=1, completion=completion
                )
            elif plan.api == "parallel":
                branches = [functools.partial(branch, i) for i in range(ITEMS)]
                result = await ctx.parallel_async(
                    branches, max_concurrency=1, completion=completion
                )
            else:
                inputs = [Item(i=i, fail=plan.fail) for i in range(ITEMS)]
                result = await ctx.map_tasks_async(
                    "item", inputs, max_concurrency=1, completion=completion
                )
            return report(result)

    return app, ran


APIS = ["map", "parallel", "map_tasks"]
RUNS = [("memory", api, name) for name in CASES for api in APIS] + [
    ("moto", "map", "tolerance exceeded by percentage"),
    ("moto", "parallel", "min_successful not reached"),
    ("moto", "map_tasks", "tolerance exceeded by count"),
]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(("where", "api", "name"), RUNS)
def test_each_completion_policy_starts_exactly_the_items_it_allows_and_says_why_it_stopped(
    where, api, name, flavour
):
    case = CASES[name]
    app, ran = policy_app(flavour)
    plan = Plan(
        api=api,
        fail=list(case.fail),
        completion=case.completion.model_dump() if case.completion else None,
    )
    with runtime_on(where, app) as runtime, runtime.time.running():
        task_id = app.client().start("batch", plan)
        settle(runtime)
        done = runtime.record(task_id)
        children = children_of(runtime, task_id)
    assert done.status == Status.SUCCEEDED, done.error
    out = done.result
    started = list(range(case.started))
    assert out["started"] == started
    assert dict(ran) == dict.fromkeys(started, 1)  # each started item ran once; no other ran
    failed = [i for i in case.fail if i < case.started]
    assert out["failed"] == failed
    assert out["results"] == [i * 10 for i in started if i not in failed]
    assert out["counts"] == [len(started) - len(failed), len(failed), len(started)]
    assert out["has_failure"] is bool(failed)
    assert (out["status"], out["reason"]) == (case.status, case.reason)
    # values(): the results in index order, or BatchError naming every failed item.
    assert out["values"] == ({"batch_error": failed} if failed else [i * 10 for i in started])
    if api == "map_tasks":
        # Every child ended; those the policy did not need were cancelled before they ran.
        ended = {int(c.task_id.rsplit(".", 1)[1]): c.status for c in children}
        assert ended == {
            i: Status.CANCELLED
            if i >= case.started
            else (Status.FAILED if i in failed else Status.SUCCEEDED)
            for i in range(ITEMS)
        }


class Bad(BaseModel):
    api: str
    max_concurrency: Any = None
    items: int = 3
    catch: bool = False


def strict_app(flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()

    def report(result: BatchResult) -> dict[str, Any]:
        return {
            "items": len(result.items),
            "values": result.values(),
            "status": result.status,
            "reason": result.completion_reason,
            "total": result.total_count,
        }

    if flavour == "sync":

        @app.step
        def work(i: int) -> int:
            ran[f"item {i}"] += 1
            return i

        @app.task(state=Item)
        def item(ctx: TaskContext[Item]) -> int:
            return work(ctx.state.i)

        @app.task(state=Bad)
        def strict(ctx: TaskContext[Bad]) -> dict[str, Any]:
            if ctx.state.catch:
                try:
                    return batch(ctx)
                except ConfigurationError as exc:
                    return {"error": str(exc)}
            return batch(ctx)

        def batch(ctx: TaskContext[Bad]) -> dict[str, Any]:
            bad, n = ctx.state.max_concurrency, ctx.state.items
            result: BatchResult
            if ctx.state.api == "map":
                result = ctx.map(range(n), lambda c, i, index: work(i), max_concurrency=bad)
            elif ctx.state.api == "parallel":
                branches = [functools.partial(lambda i, c: work(i), i) for i in range(n)]
                result = ctx.parallel(branches, max_concurrency=bad)
            else:
                result = ctx.map_tasks("item", [Item(i=i) for i in range(n)], max_concurrency=bad)
            return report(result)

    else:

        @app.step
        async def work(i: int) -> int:
            ran[f"item {i}"] += 1
            return i

        async def one(ctx: TaskContext[Bad], i: int, index: int = 0) -> int:
            return await work(i)

        @app.task(state=Item)
        async def item(ctx: TaskContext[Item]) -> int:
            return await work(ctx.state.i)

        @app.task(state=Bad)
        async def strict(ctx: TaskContext[Bad]) -> dict[str, Any]:
            if ctx.state.catch:
                try:
                    return await batch(ctx)
                except ConfigurationError as exc:
                    return {"error": str(exc)}
            return await batch(ctx)

        async def batch(ctx: TaskContext[Bad]) -> dict[str, Any]:
            bad, n = ctx.state.max_concurrency, ctx.state.items
            result: BatchResult
            if ctx.state.api == "map":
                result = await ctx.map_async(range(n), one, max_concurrency=bad)
            elif ctx.state.api == "parallel":
                branches = [functools.partial(lambda i, c: one(c, i), i) for i in range(n)]
                result = await ctx.parallel_async(branches, max_concurrency=bad)
            else:
                inputs = [Item(i=i) for i in range(n)]
                result = await ctx.map_tasks_async("item", inputs, max_concurrency=bad)
            return report(result)

    return app, ran


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("bad", [0, -2, 2.5, "4", True])
def test_a_max_concurrency_that_is_not_a_positive_int_fails_the_task_before_any_item_runs(
    api, bad, flavour
):
    app, ran = strict_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        task_id = app.client().start("strict", Bad(api=api, max_concurrency=bad))
        caught = app.client().start("strict", Bad(api=api, max_concurrency=bad, catch=True))
        settle(runtime)
        done, told = runtime.record(task_id), runtime.record(caught)
        created = runtime.store.list_keys("tasks/")
    assert done.status == Status.FAILED
    assert done.error is not None
    assert done.error.type == ConfigurationError.__name__
    assert "max_concurrency must be a positive integer or None" in done.error.message
    assert repr(bad) in done.error.message or str(bad) in done.error.message
    assert caught in told.result["error"]  # the error, as the task sees it, names the task
    assert ran == Counter()  # not one item ran
    assert done.children == told.children == []  # no child task was created either
    assert {key.split("/")[1] for key in created} == {task_id, caught}


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("api", APIS)
def test_an_empty_batch_is_an_empty_succeeded_batch(backend, api, flavour):
    app, ran = strict_app(flavour)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("strict", Bad(api=api, max_concurrency=4, items=0))
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == {
        "items": 0,
        "values": [],
        "status": "succeeded",
        "reason": "all_completed",
        "total": 0,
    }
    assert ran == Counter()
