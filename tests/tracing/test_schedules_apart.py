"""A test of one task traces that task only, though its app declares a frequent schedule:
the runner fires the app's schedules as the test advances its clock, not while a task runs."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.integrations.opentelemetry import Tracing
from continuum.testing import TaskRunner
from tests.tracing.conftest import provider_of


class Trip(BaseModel):
    city: str


def test_a_run_of_one_task_in_an_app_with_a_one_minute_schedule_is_one_trace(backend):
    exporter = InMemorySpanExporter()
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider_of(exporter)))

    @app.task(state=Trip)
    def trip(ctx: TaskContext[Trip]) -> str:
        ctx.sleep(3600, name="nap")
        return f"booked {ctx.state.city}"

    app.schedule("ops-report", trip, every=timedelta(minutes=1), input={"city": "Bergen"})
    with TaskRunner(app, backend=backend) as runner:
        assert runner.run("trip", {"city": "Oslo"}).result == "booked Oslo"
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans if span.parent is None] == ["task trip"]
    assert len({span.context.trace_id for span in spans}) == 1
