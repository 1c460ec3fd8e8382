"""Retry and fork of tasks with children and batches: what a parent hears, what runs again.

- A fork of a parent gets its own children for the calls that had not finished at its
  checkpoint (their ids derive from the fork's id); finished calls keep their results.
- A retried child counts for its parent by its latest outcome while the parent waits for
  it; a retried parent takes its failed children's latest outcomes, retrying those that
  failed.
- A retried task runs again the failed items of the batch (or the failed block) where its
  turn failed; the items that succeeded return their recorded results.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.fanout.kit import runtime_on

BACKENDS = ["memory", "moto"]


class Gate(BaseModel):
    i: int


class Fan(BaseModel):
    n: int = 2


def gated_app() -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()

    @app.step
    def work(i: int) -> int:
        ran[f"work {i}"] += 1
        return i * 10

    @app.task(state=Gate)
    def gate(ctx: TaskContext[Gate]) -> int:
        ctx.wait_for_signal("go")
        return work(ctx.state.i)

    @app.task(state=Fan)
    def fan(ctx: TaskContext[Fan]) -> Any:
        first = ctx.invoke("gate", Gate(i=1))
        rest = ctx.map_tasks("gate", [Gate(i=i) for i in range(2, 2 + ctx.state.n)])
        return [first, *rest.values()]

    return app, ran


def drain(runtime: Any) -> None:
    """Run every message due now (a waiting parent's look every 15 minutes is not)."""
    for _ in range(2000):
        if runtime.invoke_once() is None:
            return
    raise AssertionError("the queue never emptied")


def _open_gates(runtime: Any, app: Continuum) -> None:
    for summary in app.client().tasks(task_name="gate", status="waiting"):
        app.client().signal(summary.task_id, "go")
    drain(runtime)


@pytest.mark.parametrize("where", BACKENDS)
def test_a_fork_of_a_parent_waiting_for_its_children_gets_children_of_its_own(where):
    app, _ = gated_app()
    with runtime_on(where, app) as runtime, runtime.time.running():
        app.client().start("fan", Fan(), task_id="fan")
        drain(runtime)
        _open_gates(runtime, app)  # the invoke's child ends; the batch's children wait
        assert runtime.record("fan").status == Status.WAITING
        app.client().fork("fan", version="latest", new_id="what-if")
        drain(runtime)
        _open_gates(runtime, app)
        original, fork = runtime.record("fan"), runtime.record("what-if")
        theirs = [child for batch in original.children for child in batch.ids()]
        mine = [child for batch in fork.children for child in batch.ids()]
        parents = {runtime.record(child).parent.task_id for child in mine}
    assert (original.status, original.result) == (Status.SUCCEEDED, [10, 20, 30])
    assert (fork.status, fork.result) == (Status.SUCCEEDED, [10, 20, 30])
    # The invoke had finished at the checkpoint: its result is kept. The batch had not: the
    # fork started its own children, ids derived from its own id, reporting to it.
    assert len(theirs) == 3
    assert len(mine) == 2
    assert all(child.startswith("what-if.") for child in mine)
    assert parents == {"what-if"}
