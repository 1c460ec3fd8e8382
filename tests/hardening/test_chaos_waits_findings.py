"""Library bugs the wait and fan-out kinds of the fault run (``make chaos``) found.

Found by ``python -m chaos.harness --tasks 30 --seed 1`` (the ``fanmap`` kind), each reduced
to a small reproducer here.
"""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, drain, raw_record
from tests.support import LocalRuntime


class Items(BaseModel):
    n: int = 2


def test_a_batch_item_suspended_before_its_first_step_resumes():
    """A ``ctx.map`` item that was entered but suspended before its first step (the budget
    ran out right after the claim) was saved with no journal of its own; the stored record
    lost the empty list (``children: []`` became None), and the next invocation failed the
    task with a bare AssertionError instead of running the item."""
    app = Continuum(visibility_margin_s=None)
    runs: list[int] = []

    @app.step
    def piece(x: int) -> int:
        runs.append(x)
        return x * 10

    @app.task(state=Items)
    def fan(ctx: TaskContext[Items]) -> list[int]:
        return ctx.map(range(ctx.state.n), lambda child, x, i: piece(x), name="items").values()

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    task_id = app.client().start("fan", {})
    runtime.invoke_once(ScriptedContext(0, lambda: len(runs)))
    stored = raw_record(runtime, task_id)
    assert stored["status"] == "suspended"
    assert [item["partial"] for item in stored["journal"][0]["children"]] == [True, True]
    app.update_settings()  # another execution environment: it reads the record from the store
    record = drain(runtime, task_id, lambda i: ScriptedContext(None, lambda: len(runs)))
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == [0, 10]
    assert sorted(runs) == [0, 1]
