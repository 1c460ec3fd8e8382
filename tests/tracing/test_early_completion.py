"""A batch that completes early (``min_successful``) ends the items it no longer needs, and
the waits they were in, as ``abandoned``: no status (UNSET), an attribute saying so."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from continuum import Status, TaskContext
from continuum._define.completion import Completion
from tests.support import LocalRuntime
from tests.tracing.conftest import attribute, doubled, spans_of

#: How each naming says "ended unneeded", on a context and on a wait.
ABANDONED = {
    "continuum": {
        "item 1": ("continuum.context.outcome", "abandoned"),
        "wait long": ("continuum.wait.outcome", "abandoned"),
    },
    "aws": {
        "item 1": ("durable.operation.status", "CANCELLED"),
        "long": ("durable.operation.status", "CANCELLED"),
    },
}


class Plan(BaseModel):
    city: str = "Oslo"


def test_an_item_a_batch_no_longer_needs_ends_abandoned_with_its_wait(
    traced, exporter, naming, aws
):
    app = traced(naming)

    @app.step
    def look(i: int) -> int:
        return i

    def fast(ctx: TaskContext[Plan]) -> int:
        ctx.sleep(60, name="short")
        return look(0)

    def slow(ctx: TaskContext[Plan]) -> int:
        ctx.sleep(86400, name="long")
        return look(1)

    @app.task(state=Plan)
    def race(ctx: TaskContext[Plan]) -> str:
        batch = ctx.parallel([fast, slow], name="race", completion=Completion(min_successful=1))
        ctx.sleep(600, name="after")
        return str(batch.completion_reason)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("race", {}, task_id="race-1"))
    assert runtime.record("race-1").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    for name, (key, value) in ABANDONED[naming].items():
        [ended] = [s for s in spans if s.name == name and not is_open(s, naming)]
        assert attribute(ended, key) == value
        assert ended.status.is_unset


def is_open(span: ReadableSpan, naming: str) -> bool:
    key = "continuum.wait.outcome" if naming == "continuum" else "durable.operation.status"
    return attribute(span, key) in ("started", "STARTED")
