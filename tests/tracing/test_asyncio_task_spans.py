"""An asyncio task of an async turn journals in a child context of its own: its span, named
after the coroutine it runs, holds the step's (as docs/tracing.md says)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.integrations.opentelemetry import Tracing
from continuum.testing import TaskRunner
from tests.tracing.conftest import provider_of


class Prices(BaseModel):
    prices: list[int] = []


def test_each_gathered_step_is_held_by_its_asyncio_tasks_context_span_of_the_same_name():
    exporter = InMemorySpanExporter()
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider_of(exporter)))

    @app.step
    async def fetch_price(item: int) -> int:
        return item * 10

    @app.task(state=Prices)
    async def order(ctx: TaskContext[Prices]) -> int:
        ctx.state.prices = list(await asyncio.gather(*(fetch_price(i) for i in range(2))))
        return sum(ctx.state.prices)

    with TaskRunner(app) as runner:
        assert runner.run("order", {}).result == 10
    spans = exporter.get_finished_spans()
    name = {span.context.span_id: span.name for span in spans}
    chains = sorted(
        (span.name, name[span.parent.span_id])
        for span in spans
        if span.parent is not None and span.name.startswith("fetch_price")
    )
    assert chains == [
        ("fetch_price", "fetch_price"),
        ("fetch_price", "fetch_price"),
        ("fetch_price", "task order"),
        ("fetch_price", "task order"),
        ("fetch_price attempt 1", "fetch_price"),
        ("fetch_price attempt 1", "fetch_price"),
    ]
