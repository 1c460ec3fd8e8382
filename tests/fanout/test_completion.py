"""Every completion policy, on ``ctx.map``, ``ctx.parallel`` and ``ctx.map_tasks``.

Ten items, one at a time (``max_concurrency=1``), so which items start is exact: an item
starts only while the policy has not decided. Each item is one step, ``work(i)``, that fails
for the indexes the case names; the test counts the steps that really ran.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import BatchResult, Completion, Continuum, Status, TaskContext
from tests.fanout.kit import children_of, settle

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
        "succeeded",
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
        Completion(min_successful=3), (1,), 4, "succeeded", "min_successful_reached"
    ),
    "min_successful not reached": Case(
        Completion(min_successful=8), (0, 4, 9), ITEMS, "failed", "all_completed"
    ),
}


def policy_app() -> tuple[Continuum, Counter[int]]:
    app = Continuum()
    ran: Counter[int] = Counter()

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
        plan = ctx.state
        completion = Completion(**plan.completion) if plan.completion is not None else None
        result: BatchResult
        if plan.api == "map":
            result = ctx.map(range(ITEMS), one_item, max_concurrency=1, completion=completion)
        elif plan.api == "parallel":
            branches = [functools.partial(branch, i) for i in range(ITEMS)]
            result = ctx.parallel(branches, max_concurrency=1, completion=completion)
        else:
            inputs = [Item(i=i, fail=plan.fail) for i in range(ITEMS)]
            result = ctx.map_tasks("item", inputs, max_concurrency=1, completion=completion)
        return {
            "status": result.status,
            "reason": result.completion_reason,
            "started": [item.index for item in result.items],
            "failed": [item.index for item in result.failed()],
            "results": [item.result for item in result.succeeded()],
            "counts": [result.success_count, result.failure_count, result.total_count],
            "has_failure": result.has_failure,
        }

    return app, ran


@pytest.mark.parametrize("api", ["map", "parallel", "map_tasks"])
@pytest.mark.parametrize("name", list(CASES))
def test_each_completion_policy_starts_exactly_the_items_it_allows_and_says_why_it_stopped(
    make_runtime, api, name
):
    case = CASES[name]
    app, ran = policy_app()
    runtime = make_runtime(app)
    plan = Plan(
        api=api,
        fail=list(case.fail),
        completion=case.completion.model_dump() if case.completion else None,
    )
    with runtime.time.running():
        task_id = app.client().start("batch", plan)
        settle(runtime)
        done = runtime.record(task_id)
        children = children_of(runtime, task_id)
    assert done.status == Status.SUCCEEDED, done.error
    out = done.result
    started = list(range(case.started))
    assert out["started"] == started
    assert dict(ran) == {i: 1 for i in started}  # each started item ran once; no other ran
    failed = [i for i in case.fail if i < case.started]
    assert out["failed"] == failed
    assert out["results"] == [i * 10 for i in started if i not in failed]
    assert out["counts"] == [len(started) - len(failed), len(failed), len(started)]
    assert out["has_failure"] is bool(failed)
    assert (out["status"], out["reason"]) == (case.status, case.reason)
    if api == "map_tasks":
        # Every child ended; those the policy did not need were cancelled before they ran.
        ended = {int(c.task_id.rsplit(".", 1)[1]): c.status for c in children}
        assert ended == {
            i: Status.CANCELLED
            if i >= case.started
            else (Status.FAILED if i in failed else Status.SUCCEEDED)
            for i in range(ITEMS)
        }
