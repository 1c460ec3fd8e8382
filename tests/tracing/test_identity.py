"""One trace per task, and only that task's: ids derive from the stack and the task id, alike in
every process and invocation, and apart between stacks."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import spans_of


class Night(BaseModel):
    day: str = "2027-01-15"


def test_two_stacks_running_one_task_id_send_two_traces(traced, exporter, naming, aws):
    roots = {}
    for prefix in ("staging", "production"):
        app = traced(naming, prefix=prefix)

        @app.task(state=Night)
        def nightly(ctx: TaskContext[Night]) -> str:
            ctx.sleep(60, name="settle")
            return ctx.state.day

        runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
        runtime.drive(app.client().start("nightly", {}, task_id="nightly-20270115T020000Z"))
        roots[prefix] = {s.context.trace_id for s in spans_of(exporter)}
        exporter.clear()
    assert len(roots["staging"]) == len(roots["production"]) == 1
    assert roots["staging"] != roots["production"]
