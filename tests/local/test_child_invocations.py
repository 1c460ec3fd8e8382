"""The local runtime reports an invocation that ran a child task as the child's (its name,
its index in the batch, its steps), not as one more invocation of the task it follows
(``continuum run`` prints these lines); it runs a parent on while its children only wait for
time, and stops when one waits for the outside world."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from samples import research_team
from tests.support import LocalRuntime


class Nap(BaseModel):
    seconds: float = 0


def test_a_child_tasks_invocations_are_reported_as_the_childs():
    runtime = LocalRuntime(research_team.app, budget_s=60, backend="memory", virtual_time=True)
    seen = []
    summary = runtime.run(
        "lead", {"topic": "tides", "latency_scale": 0.01}, on_invocation=seen.append
    )
    assert summary.status == "succeeded", summary.error

    children = [inv for inv in seen if inv.task_id is not None]
    assert {inv.task_name for inv in children} == {"researcher"}
    assert sorted(inv.index for inv in children) == list(range(6))  # one invocation each
    records = {inv.task_id: runtime.record(str(inv.task_id)) for inv in children}
    for inv in children:
        assert inv.status == records[inv.task_id].status.value
        assert inv.steps_executed == records[inv.task_id].counters.steps_executed
    lead = [inv for inv in seen if inv.task_id is None]
    assert sum(inv.steps_executed for inv in lead) == summary.steps
    assert lead[-1].status == "succeeded"


def sleeping_child_app() -> Continuum:
    app = Continuum()

    @app.task(state=Nap)
    def nap(ctx: TaskContext[Nap]) -> str:
        ctx.sleep(ctx.state.seconds)
        return "rested"

    @app.task(state=Nap)
    def parent(ctx: TaskContext[Nap]) -> str:
        return ctx.invoke("nap", {"seconds": ctx.state.seconds}, name="one")

    @app.task(state=Nap)
    def many(ctx: TaskContext[Nap]) -> list[str]:
        return ctx.map_tasks("nap", [{"seconds": ctx.state.seconds}] * 2).values()

    @app.task(state=Nap)
    def asks(ctx: TaskContext[Nap]) -> str:
        return ctx.wait_for_callback(lambda callback_id: None, name="answer")

    @app.task(state=Nap)
    def asks_through_a_child(ctx: TaskContext[Nap]) -> str:
        return ctx.invoke("asks", {}, name="one")

    return app


@pytest.mark.parametrize("task", ["parent", "many"])
def test_a_parent_whose_children_only_sleep_runs_on_to_its_end(task):
    runtime = LocalRuntime(sleeping_child_app(), budget_s=5, backend="memory", virtual_time=True)
    summary = runtime.run(task, {"seconds": 60})
    assert summary.status == "succeeded", summary.error


def test_a_parent_whose_child_waits_for_the_outside_world_stops_waiting():
    runtime = LocalRuntime(sleeping_child_app(), budget_s=5, backend="memory", virtual_time=True)
    summary = runtime.run("asks_through_a_child", {})
    assert summary.status == "waiting"
