"""A child's wake LISTs its parent's inbox only when its report can let the batch decide.

In ``map_tasks`` with ``max_concurrency`` and no completion policy, a child with a successor
starts that successor only after its own report is written, so the successor reports later
and the last report's wake is the one that finds the batch complete: the others need no LIST
(without this, a batch of N LISTs N times, O(N^2) keys in all: ``benchmarks.fanout_tasks``).
With a completion policy any report may decide, so every wake LISTs.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from continuum import Completion, Continuum, TaskContext
from tests.support import LocalRuntime

N = 12
LIMIT = 3


class Fan(BaseModel):
    n: int
    policy: bool = False


class Leaf(BaseModel):
    i: int


def build() -> Continuum:
    app = Continuum()

    @app.step
    def double(i: int) -> int:
        return 2 * i

    @app.task(state=Leaf)
    def leaf(ctx: TaskContext[Leaf]) -> int:
        return int(double(ctx.state.i))

    @app.task(state=Fan)
    def fan(ctx: TaskContext[Fan]) -> int:
        completion = Completion(tolerated_failure_count=N) if ctx.state.policy else None
        inputs = [{"i": i} for i in range(ctx.state.n)]
        batch = ctx.map_tasks("leaf", inputs, max_concurrency=LIMIT, completion=completion)
        return sum(batch.values())

    return app


def inbox_lists(policy: bool) -> int:
    """The LISTs of the parent's inbox in one run."""
    app = build()
    runtime = LocalRuntime(app, budget_s=60, backend="memory", virtual_time=True)
    counted = runtime.store.on_call
    lists: Counter[str] = Counter()

    def on_call(operation: str, key: str) -> None:
        if operation == "list":
            lists[key] += 1
        if counted is not None:
            counted(operation, key)

    runtime.store.on_call = on_call
    summary = runtime.run("fan", {"n": N, "policy": policy}, task_id="fan")
    assert summary.status == "succeeded", summary.error
    assert summary.result == N * (N - 1)
    return sum(n for prefix, n in lists.items() if prefix.endswith("/fan/inbox/"))


def test_only_the_wakes_of_children_without_a_successor_list_the_inbox():
    lists = inbox_lists(policy=False)
    # LIMIT children have no successor; the parent's own two invocations list it too.
    assert lists <= LIMIT + 4, lists
    assert lists < N


def test_with_a_completion_policy_every_wake_lists_the_inbox():
    lists = inbox_lists(policy=True)
    assert lists >= N, lists
