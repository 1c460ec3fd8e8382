"""A task cancelled while it waits closes what it waited in: each wait and operation the
cancel ends is sent, under the span that holds it, with outcome ``cancelled``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from continuum import Status, TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import attribute, doubled, spans_of

#: How each naming says "ended by a cancel", on a wait or an operation.
CANCELLED = {
    "continuum": {"wait": ("continuum.wait.outcome", "cancelled")},
    "aws": {"wait": ("durable.operation.status", "STOPPED")},
}
CANCELLED["continuum"]["operation"] = ("continuum.operation.outcome", "cancelled")
CANCELLED["aws"]["operation"] = CANCELLED["aws"]["wait"]


class Empty(BaseModel):
    pass


def cancel_while_waiting(traced, exporter, naming, aws, wait) -> list[ReadableSpan]:
    app = traced(naming)

    @app.step
    def ask(callback_id: str) -> None:
        pass

    @app.task(state=Empty)
    def child(ctx: TaskContext[Empty]) -> None:
        ctx.sleep(timedelta(days=1), name="nap")

    @app.task(state=Empty)
    def waiter(ctx: TaskContext[Empty]) -> None:
        if wait == "wait_for_callback":
            ctx.wait_for_callback(ask, name="mgr", timeout=timedelta(days=1))
        elif wait == "children":
            ctx.invoke("child", {}, name="mgr")
        elif wait == "signal":
            ctx.wait_for_signal("mgr")
        else:
            ctx.sleep(timedelta(days=1), name="mgr")

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    with runtime.time.running():
        task_id = app.client().start("waiter", {}, task_id="cancelled-1")
        runtime.invoke_once()
        assert runtime.record(task_id).status == Status.WAITING
        app.client().cancel(task_id, "withdrawn")
        runtime.drive(task_id)
        while runtime.invoke_once() is not None:  # a child's cancel
            pass
    assert runtime.record(task_id).status == Status.CANCELLED
    return spans_of(exporter)


@pytest.mark.parametrize("wait", ["wait_for_callback", "signal", "sleep", "children"])
def test_a_cancel_closes_the_wait_it_ended_under_the_span_that_holds_it(
    traced, exporter, naming, aws, wait
):
    spans = cancel_while_waiting(traced, exporter, naming, aws, wait)
    sent = {s.context.span_id for s in spans}
    assert [s.name for s in spans if s.parent and s.parent.span_id not in sent] == []
    assert doubled(spans) == []
    name, value = CANCELLED[naming]["wait"]
    closed = [s for s in spans if attribute(s, name) == value and not is_operation(s, naming)]
    assert len([s for s in closed if of_the_waiter(s)]) == 1  # a child's nap is another
    assert closed[0].status.is_unset  # as a cancelled task's root


def test_a_cancel_closes_the_wait_for_callback_it_ended_with_its_submitter_under_it(
    traced, exporter, naming, aws
):
    spans = cancel_while_waiting(traced, exporter, naming, aws, "wait_for_callback")
    name, value = CANCELLED[naming]["operation"]
    [closed] = [s for s in spans if is_operation(s, naming) and attribute(s, name) == value]
    [submitter] = [s for s in spans if s.name == "mgr.submit"]
    assert submitter.parent is not None
    assert submitter.parent.span_id == closed.context.span_id
    assert closed.status.is_unset  # as a cancelled task's root


def is_operation(span: ReadableSpan, naming: str) -> bool:
    if naming == "continuum":
        return attribute(span, "continuum.operation.kind") == "wait_for_callback"
    return attribute(span, "durable.operation.subtype") == "WaitForCallback"


def of_the_waiter(span: ReadableSpan) -> bool:
    task = attribute(span, "continuum.task.id") or attribute(span, "durable.execution.arn")
    return str(task).endswith("cancelled-1")
