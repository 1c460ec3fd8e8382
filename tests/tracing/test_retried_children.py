"""A child task retried after it failed hangs where its new run belongs in its parent's trace."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import Status, TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import (
    assert_parents_contain_children,
    doubled,
    named,
    parent_of,
    spans_of,
)


class Leg(BaseModel):
    city: str = "Bergen"


CALLS = ("invoke", "map_tasks", "invoke in a child context")


@pytest.mark.parametrize("call", CALLS)
def test_a_child_retried_with_its_parent_hangs_under_the_wait_of_the_parents_new_run(
    traced, exporter, naming, call, aws
):
    app = traced(naming)
    drives: list[str] = []

    @app.step
    def drive(city: str) -> str:
        drives.append(city)
        if len(drives) == 1:
            raise ConnectionError("the road is closed")
        return f"at {city}"

    @app.task(state=Leg)
    def leg(ctx: TaskContext[Leg]) -> str:
        return drive(ctx.state.city)

    def legs(ctx: TaskContext[Leg]) -> str:
        if call == "map_tasks":
            return str(ctx.map_tasks("leg", [{"city": ctx.state.city}], name="legs").values())
        return str(ctx.invoke("leg", {"city": ctx.state.city}, name="legs"))

    @app.task(state=Leg)
    def tour(ctx: TaskContext[Leg]) -> str:
        if call == "invoke in a child context":
            return ctx.child_context(legs, name="planning")
        return legs(ctx)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("tour", {}, task_id="tour-1"))
    assert runtime.record("tour-1").status == Status.FAILED
    app.client().retry("tour-1")  # retries the failed child first
    runtime.drive("tour-1")
    assert runtime.record("tour-1").status == Status.SUCCEEDED, runtime.record("tour-1").error
    spans = spans_of(exporter)
    assert doubled(spans) == []
    wait_name = "legs" if naming == "aws" else "wait legs"
    waits = [w for w in named(spans, wait_name) if not w.status.is_unset]
    waits.sort(key=lambda s: s.end_time or 0)
    assert len(waits) == 2, "the parent's wait in each of its runs"
    child_root = "Workflow" if naming == "aws" else "task leg"
    runs = [s for s in named(spans, child_root) if s.parent is not None]
    runs.sort(key=lambda s: s.end_time or 0)
    assert [r.status.status_code.name for r in runs] == ["ERROR", "OK"]
    assert parent_of(runs[0], spans) is waits[0]
    assert parent_of(runs[1], spans) is waits[1], "under the wait that waits for it"
    assert_parents_contain_children(spans)


def test_a_child_retried_alone_while_its_parent_waits_hangs_under_that_wait(
    traced, exporter, naming, aws
):
    app = traced(naming)
    drives: list[str] = []

    @app.step
    def drive(city: str) -> str:
        drives.append(city)
        if city == "Bergen" and drives.count(city) == 1:
            raise ConnectionError("the road is closed")
        return f"at {city}"

    @app.task(state=Leg)
    def leg(ctx: TaskContext[Leg]) -> str:
        if ctx.state.city == "Trondheim":
            ctx.sleep(3600, name="ferry")  # the parent still waits while its sibling is retried
        return drive(ctx.state.city)

    @app.task(state=Leg)
    def tour(ctx: TaskContext[Leg]) -> list[str]:
        legs = ctx.map_tasks("leg", [{"city": "Bergen"}, {"city": "Trondheim"}], name="legs")
        return [str(value) for value in legs.values()]

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    bergen = "tour-2.0.legs-0.0"

    def bergen_failed() -> bool:
        record = runtime.record_if_any(bergen)
        return record is not None and record.status == Status.FAILED

    runtime.drive(app.client().start("tour", {}, task_id="tour-2"), should_stop=bergen_failed)
    assert runtime.record(bergen).status == Status.FAILED
    assert runtime.record("tour-2").status == Status.WAITING
    app.client().retry(bergen)
    runtime.drive("tour-2")
    assert runtime.record("tour-2").status == Status.SUCCEEDED, runtime.record("tour-2").error
    spans = spans_of(exporter)
    assert doubled(spans) == []
    [wait] = [
        w for w in named(spans, "legs" if naming == "aws" else "wait legs") if not w.status.is_unset
    ]
    child_root = "Workflow" if naming == "aws" else "task leg"
    runs = [s for s in named(spans, child_root) if s.parent is not None]
    assert len(runs) == 3, "Bergen's two runs and Trondheim's one"
    assert all(parent_of(run, spans) is wait for run in runs)
    assert_parents_contain_children(spans)
