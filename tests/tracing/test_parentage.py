"""Each span hangs under the span that contains it, in time as in the tree."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import assert_parents_contain_children, named, spans_of


class Plan(BaseModel):
    city: str = "Oslo"


def test_the_root_ends_after_the_invocation_that_finished_the_task(traced, exporter, naming, aws):
    app = traced(naming)

    @app.step
    def book(city: str) -> str:
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        ctx.sleep(60, name="nap")
        return book(ctx.state.city)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-1"))
    spans = spans_of(exporter)
    assert len(named(spans, "Invocation" if naming == "aws" else "invocation")) == 2
    assert_parents_contain_children(spans)
