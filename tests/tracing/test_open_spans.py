"""What is open when an invocation ends shows in that invocation, within it in time, in every
invocation it stays open through; and no span starts before the task it belongs to."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from continuum import Status, TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import assert_parents_contain_children, doubled, spans_of


class Plan(BaseModel):
    city: str = "Oslo"


def invocations(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    found = [s for s in spans if s.name in ("invocation", "Invocation")]
    return sorted(found, key=lambda s: s.start_time or 0)


def open_in(spans: list[ReadableSpan], name: str) -> list[int]:
    """The numbers (1: the first) of the invocations ``name`` shows in as open (UNSET)."""
    opened = {s.parent.span_id for s in spans if s.name == name and s.parent and s.status.is_unset}
    return [n for n, i in enumerate(invocations(spans), 1) if i.context.span_id in opened]


def run(app: Any, aws: str, task: str, task_id: str, answer: Any = None) -> Any:
    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start(task, {}, task_id=task_id))
    if answer is not None:
        answer(runtime)
        runtime.drive(task_id, stop_when_waiting=False)
    return runtime.record(task_id)


def test_a_wait_open_through_a_later_invocation_shows_in_it_too(traced, exporter, naming, aws):
    app = traced(naming)

    @app.step
    def look() -> str:
        return "x"

    def approval(ctx: TaskContext[Plan]) -> str:
        return str(ctx.wait_for_signal("approve", timeout=86400))

    def chores(ctx: TaskContext[Plan]) -> str:
        ctx.sleep(60, name="brief")
        return look()

    @app.task(state=Plan)
    def both(ctx: TaskContext[Plan]) -> list[str]:
        return ctx.parallel([approval, chores], name="pair").values()

    def approve(runtime: LocalRuntime) -> None:
        app.client().signal("ow-1", "approve", {"ok": True})

    assert run(app, aws, "both", "ow-1", approve).status == Status.SUCCEEDED
    spans = spans_of(exporter)
    # the signal's invocation (2) ran while the brief sleep went on: it was open in both
    assert len(invocations(spans)) == 3
    assert open_in(spans, "wait brief" if naming == "continuum" else "brief") == [1, 2]
    assert doubled(spans) == []


def test_a_step_retried_over_three_invocations_shows_open_within_each(
    traced, exporter, naming, aws
):
    app = traced(naming)
    calls: list[int] = []

    @app.step(retries=3, backoff_s=1200)
    def book() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "ok"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        return book()

    assert run(app, aws, "trip", "st-1").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert open_in(spans, "book") == [1, 2]
    assert_parents_contain_children(spans)


def test_a_wait_for_callback_whose_submitter_retried_shows_open_within_each_invocation(
    traced, exporter, naming, aws
):
    app = traced(naming)
    calls: list[int] = []

    def submit(callback_id: str) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("desk down")

    @app.task(state=Plan)
    def approve(ctx: TaskContext[Plan]) -> str:
        ctx.sleep(60, name="first")
        return str(
            ctx.wait_for_callback(submit, name="ok", retries=2, backoff_s=1200, timeout=86400)
        )

    def answer(runtime: LocalRuntime) -> None:
        for token in runtime.record("cb-1").callbacks:
            app.client().complete_callback(f"cb-1.{token}", "yes")

    assert run(app, aws, "approve", "cb-1", answer).status == Status.SUCCEEDED
    assert_parents_contain_children(spans_of(exporter))


def test_a_fork_taken_during_a_wait_starts_each_span_within_its_root(traced, exporter, naming, aws):
    app = traced(naming)

    @app.step
    def book(city: str) -> str:
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        ctx.sleep(86400, name="think")
        return book(ctx.state.city)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    with runtime.time.running():
        app.client().start("trip", {}, task_id="trip-1")
        runtime.invoke_once()
        assert runtime.record("trip-1").status == Status.WAITING
        runtime.time.advance(3600)  # an hour later, someone forks it
        app.client().fork("trip-1", version="latest", new_id="trip-forked")
    runtime.drive("trip-forked")
    assert runtime.record("trip-forked").status == Status.SUCCEEDED
    spans = [s for s in spans_of(exporter) if of_task(s, "trip-forked")]
    assert doubled(spans) == []
    assert_parents_contain_children(spans)


def of_task(span: ReadableSpan, task_id: str) -> bool:
    attributes = span.attributes or {}
    task = attributes.get("continuum.task.id") or attributes.get("durable.execution.arn")
    return str(task).endswith(task_id)
