"""The span model of docs/tracing.md, in both namings, on both backends: one trace per task,
each span under the span that holds it and linked to the invocation it ended in, statuses as
AWS's durable-execution model sets them, the documented attributes and no others, and nothing
sent twice after replays, retries, forks and long waits."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from continuum import Status, TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import (
    assert_parents_contain_children,
    attribute,
    doubled,
    named,
    one,
    parent_of,
    spans_of,
)

#: The attributes of each kind of span, by naming: exactly these (docs/tracing.md).
COMMON = {
    "continuum": {"continuum.task.id", "continuum.task.name"},
    "aws": {"durable.execution.arn"},
}
ATTRIBUTES = {
    "continuum": {
        "root": {"continuum.task.status", "continuum.task.retries"},
        "invocation": {
            "continuum.invocation.number",
            "continuum.invocation.first",
            "continuum.invocation.message",
            "continuum.invocation.request_id",
            "continuum.invocation.outcome",
            "continuum.generation",
            "continuum.steps.executed",
            "continuum.steps.replayed",
        },
        "step": {
            "continuum.step.key",
            "continuum.step.name",
            "continuum.step.attempts",
            "continuum.step.outcome",
        },
        "attempt": {
            "continuum.step.key",
            "continuum.step.name",
            "continuum.attempt.number",
            "continuum.attempt.outcome",
            "continuum.step.replay",
        },
        "wait": {"continuum.wait.kind", "continuum.wait.key", "continuum.wait.outcome"},
        "context": {
            "continuum.context.kind",
            "continuum.context.path",
            "continuum.context.outcome",
        },
        "operation": {
            "continuum.operation.kind",
            "continuum.operation.key",
            "continuum.operation.outcome",
        },
    },
    "aws": {
        "root": {"durable.execution.status"},
        "invocation": {"durable.invocation.first", "durable.invocation.status"},
        "step": {
            "durable.operation.id",
            "durable.operation.type",
            "durable.operation.subtype",
            "durable.operation.name",
            "durable.operation.status",
            "durable.attempt.number",
        },
        "attempt": {
            "durable.operation.id",
            "durable.operation.type",
            "durable.operation.subtype",
            "durable.operation.name",
            "durable.attempt.number",
            "durable.attempt.outcome",
        },
        "wait": {
            "durable.operation.id",
            "durable.operation.type",
            "durable.operation.subtype",
            "durable.operation.name",
            "durable.operation.status",
        },
        "context": {
            "durable.operation.id",
            "durable.operation.type",
            "durable.operation.subtype",
            "durable.operation.name",
            "durable.operation.status",
        },
    },
}
NAMES = {
    "continuum": {"root": "task trip", "invocation": "invocation", "nap": "wait nap"},
    "aws": {"root": "Workflow", "invocation": "Invocation", "nap": "nap"},
}


#: The task's long wait (two hours: eight delayed messages of 15 minutes).
NAP_S = 2 * 3600


class Trip(BaseModel):
    cities: list[str] = ["Oslo", "Bergen"]


def kind_of(span: ReadableSpan, naming: str) -> str:
    """What a span is, read from its attributes as a dashboard would."""
    attributes = set(span.attributes or {})
    if naming == "continuum":
        for kind, marker in (
            ("attempt", "continuum.attempt.number"),
            ("step", "continuum.step.attempts"),
            ("wait", "continuum.wait.kind"),
            ("context", "continuum.context.kind"),
            ("operation", "continuum.operation.kind"),
            ("invocation", "continuum.invocation.first"),
            ("root", "continuum.task.status"),
        ):
            if marker in attributes:
                return kind
    else:
        if "durable.attempt.outcome" in attributes:
            return "attempt"
        kinds = {"STEP": "step", "CONTEXT": "context"}
        if "durable.operation.type" in attributes:
            return kinds.get(str(attribute(span, "durable.operation.type")), "wait")
        if "durable.invocation.first" in attributes:
            return "invocation"
        if "durable.execution.status" in attributes:
            return "root"
    raise AssertionError(
        f"span {span.name!r} has no documented kind: {dict(span.attributes or {})}"
    )


def trip_app(traced: Any, naming: str, calls: list[str]) -> Any:
    app = traced(naming)

    @app.step(retries=2, backoff_s=600)
    def book(city: str) -> str:
        calls.append(city)
        if calls.count(city) == 1 and city == "Oslo":
            raise ConnectionError("the booking site is down")
        return f"booked {city}"

    def visit(ctx: TaskContext[Trip], city: str, index: int) -> str:
        booked = book(city)
        ctx.sleep(60 * (index + 1), name="rest")
        return booked

    @app.task(state=Trip)
    def trip(ctx: TaskContext[Trip]) -> list[str]:
        booked = ctx.map(ctx.state.cities, visit, name="cities").values()
        ctx.sleep(NAP_S, name="nap")  # past one delayed message's reach: hops, no compute
        answer = ctx.wait_for_callback(lambda callback_id: callback_id, name="approval")
        return [*booked, answer]

    return app


#: The trip's spans and record by (naming, backend): each test reads one run of it.
_RUNS: dict[tuple[str, str], tuple[list[ReadableSpan], Any]] = {}


@pytest.fixture
def trip_spans(traced, exporter, naming, aws) -> tuple[list[ReadableSpan], Any]:
    if (naming, aws) not in _RUNS:
        _RUNS[naming, aws] = run_trip(traced, exporter, naming, aws)
    return _RUNS[naming, aws]


def run_trip(traced: Any, exporter: Any, naming: str, aws: str) -> tuple[list[ReadableSpan], Any]:
    calls: list[str] = []
    app = trip_app(traced, naming, calls)
    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    with runtime.time.running():
        task_id = app.client().start("trip", {}, task_id="trip-1")
        runtime.drive(task_id)
        [waiter] = app.client().status(task_id).waiting_for
        assert waiter.id is not None
        app.client().complete_callback(waiter.id, "approved")
        runtime.drive(task_id)
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED, record.error
    assert calls.count("Oslo") == 2
    return spans_of(exporter), record


def test_a_task_is_one_trace_of_one_root_each_span_sent_once(trip_spans, naming):
    spans, record = trip_spans
    assert doubled(spans) == []
    assert len({s.context.trace_id for s in spans}) == 1
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == [NAMES[naming]["root"]]
    invocations = named(spans, NAMES[naming]["invocation"])
    assert len(invocations) == record.counters.invocations >= 4


def test_every_span_carries_the_documented_attributes_and_no_others(trip_spans, naming):
    spans, _ = trip_spans
    for span in spans:
        kind = kind_of(span, naming)
        expected = COMMON[naming] | ATTRIBUTES[naming][kind]
        assert set(span.attributes or {}) == expected, f"{kind} span {span.name!r}"


def test_parents_hold_their_children_in_the_tree_and_in_time(trip_spans, naming):
    spans, _ = trip_spans
    assert_parents_contain_children(spans)
    root = one(spans, NAMES[naming]["root"])
    for span in spans:
        kind = kind_of(span, naming)
        above = parent_of(span, spans)
        if kind == "invocation":
            assert above is root
        elif kind == "attempt":
            assert above is not None
            assert kind_of(above, naming) == "step"
        elif span.status.status_code != StatusCode.UNSET and kind in ("step", "wait", "context"):
            assert above is not None
            assert kind_of(above, naming) in ("root", "context", "operation"), span.name


def test_statuses_are_ok_for_what_succeeded_error_for_a_failed_attempt_unset_while_open(
    trip_spans, naming
):
    spans, _ = trip_spans
    statuses: dict[str, set[StatusCode]] = {}
    for span in spans:
        statuses.setdefault(kind_of(span, naming), set()).add(span.status.status_code)
    assert statuses["root"] == {StatusCode.OK}
    assert statuses["invocation"] == {StatusCode.OK}, "a suspension is an invocation's success"
    assert statuses["attempt"] == {StatusCode.OK, StatusCode.ERROR}
    if naming == "aws":  # wait_for_callback is a CONTEXT operation there, open at first
        assert statuses["context"] == {StatusCode.OK, StatusCode.UNSET}
    else:
        assert statuses["context"] == {StatusCode.OK}
        assert statuses["operation"] == {StatusCode.OK, StatusCode.UNSET}
    # a wait (and the step whose retry waits) still open when its invocation ended: UNSET
    assert statuses["wait"] == {StatusCode.OK, StatusCode.UNSET}
    assert statuses["step"] == {StatusCode.OK, StatusCode.UNSET}


def test_an_open_wait_shows_in_the_invocation_that_reached_it(trip_spans, naming):
    spans, _ = trip_spans
    naps = named(spans, NAMES[naming]["nap"])
    open_nap = next(s for s in naps if s.status.status_code == StatusCode.UNSET)
    answered = next(s for s in naps if s.status.status_code == StatusCode.OK)
    holder = parent_of(open_nap, spans)
    assert holder is not None
    assert kind_of(holder, naming) == "invocation"
    assert answered.end_time is not None
    assert answered.start_time is not None
    assert (answered.end_time - answered.start_time) / 1e9 >= NAP_S


def test_each_operation_and_attempt_links_to_the_invocation_it_ended_in(trip_spans, naming):
    spans, _ = trip_spans
    invocations = {s.context.span_id: s for s in spans if kind_of(s, naming) == "invocation"}
    for span in spans:
        kind = kind_of(span, naming)
        if (
            kind in ("step", "attempt", "wait", "context")
            and span.status.status_code != StatusCode.UNSET
        ):
            linked = [link.context.span_id for link in span.links]
            assert len(linked) == 1, span.name
            holder = invocations[linked[0]]
            assert holder.start_time is not None
            assert span.end_time is not None
            assert holder.end_time is not None
            assert holder.start_time <= span.end_time <= holder.end_time, span.name


def test_a_retried_step_is_one_span_across_invocations_with_an_attempt_each(trip_spans, naming):
    spans, _ = trip_spans
    by_step: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if kind_of(span, naming) == "attempt":
            assert span.parent is not None
            by_step.setdefault(span.parent.span_id, []).append(span)
    [retried] = [attempts for attempts in by_step.values() if len(attempts) > 1]
    first, second = sorted(retried, key=lambda s: s.start_time or 0)
    assert (first.name, second.name) == ("book attempt 1", "book attempt 2")
    assert (first.status.status_code, second.status.status_code) == (
        StatusCode.ERROR,
        StatusCode.OK,
    )
    assert first.links[0].context.span_id != second.links[0].context.span_id
    [step] = [s for s in spans if s.context.span_id == first.parent.span_id]  # type: ignore[union-attr]
    assert step.start_time == first.start_time
    assert step.end_time == second.end_time


def test_wait_for_callback_is_one_operation_holding_its_submitter_and_its_wait(trip_spans, naming):
    spans, _ = trip_spans
    name = "approval" if naming == "aws" else "wait_for_callback approval"
    [operation] = [
        s
        for s in named(spans, name)
        if s.status.status_code == StatusCode.OK and kind_of(s, naming) in ("context", "operation")
    ]
    inside = sorted(
        s.name
        for s in spans
        if s.parent is not None and s.parent.span_id == operation.context.span_id
    )
    wait = "approval" if naming == "aws" else "wait approval"
    assert inside == sorted(["approval.submit", wait])
    assert parent_of(operation, spans) is one(spans, NAMES[naming]["root"])
