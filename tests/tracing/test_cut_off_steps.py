"""A step attempt whose asyncio task was cancelled mid-attempt ends cancelled, under a step
span that is sent abandoned when the task finishes without it."""

from __future__ import annotations

import asyncio

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from continuum import Status, TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import assert_parents_contain_children, attribute, doubled, spans_of

#: The outcome attribute of an attempt and of a step, and their values, by naming: the
#: attempt was cancelled; the step, left without its end when the task finished, abandoned.
OUTCOMES = {
    "continuum": ("continuum.attempt.outcome", "continuum.step.outcome", "cancelled", "abandoned"),
    "aws": ("durable.attempt.outcome", "durable.operation.status", "STOPPED", "CANCELLED"),
}


class Plan(BaseModel):
    city: str = "Oslo"


def test_a_step_whose_asyncio_task_was_cancelled_mid_attempt_ends_cancelled_and_abandoned(
    traced, exporter, naming, aws
):
    app = traced(naming)

    @app.step
    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    @app.step
    async def quick() -> str:
        return "quick"

    @app.task(state=Plan)
    async def race(ctx: TaskContext[Plan]) -> str:
        try:
            return await asyncio.wait_for(slow(), timeout=0.05)
        except TimeoutError:
            return await quick()

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("race", {}, task_id="race-1"))
    assert runtime.record("race-1").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    sent = {s.context.span_id for s in spans}
    assert [s.name for s in spans if s.parent and s.parent.span_id not in sent] == []
    assert_parents_contain_children(spans)
    attempt_key, step_key, cancelled, abandoned = OUTCOMES[naming]
    [attempt] = [s for s in spans if s.name == "slow attempt 1"]
    [step] = [s for s in spans if s.name == "slow" and is_step(s)]  # beside its asyncio task's
    assert attribute(attempt, attempt_key) == cancelled
    assert attribute(step, step_key) == abandoned
    assert step.status.is_unset
    assert attempt.status.is_unset


def is_step(span: ReadableSpan) -> bool:
    return "continuum.step.key" in (span.attributes or {}) or (
        attribute(span, "durable.operation.type") == "STEP"
    )
