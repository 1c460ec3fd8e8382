"""The local runtime reports an invocation that ran a child task as the child's (its name,
its index in the batch, its steps), not as one more invocation of the task it follows
(``continuum run`` prints these lines)."""

from __future__ import annotations

from samples import research_team
from tests.support import LocalRuntime


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
