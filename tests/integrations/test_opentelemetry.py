"""Tracing: continuum's observer events as OpenTelemetry spans, one trace per task across its
invocations, its child tasks in it, nothing doubled by a replay."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from continuum import Continuum, Status, TaskContext
from continuum._base.trace_ids import derived_trace_id, root_span_id
from continuum.integrations.opentelemetry import Tracing
from tests.integrations.conftest import WorkerDied, drive_through_deaths
from tests.support import LocalRuntime


class Trip(BaseModel):
    city: str = "Oslo"
    notes: list[str] = []


class Leg(BaseModel):
    city: str


#: The stack of LocalRuntime's in-memory records: the trace ids derive from it.
STACK = "memory/tasks"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def traced(exporter: InMemorySpanExporter) -> Continuum:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider))
    return app


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in spans]}"
    return found[0]


def assert_no_duplicates(spans: list[ReadableSpan]) -> None:
    ids = Counter((s.context.trace_id, s.context.span_id) for s in spans)
    doubled = [
        (s.name, dict(s.attributes or {}))
        for s in spans
        if ids[s.context.trace_id, s.context.span_id] > 1
    ]
    assert not doubled, f"spans emitted twice: {doubled}"


def answered(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The spans but those of what was still open when an invocation ended (status UNSET)."""
    return [s for s in spans if s.status.status_code != StatusCode.UNSET]


def seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None
    assert span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


def trip_app(exporter: InMemorySpanExporter, calls: list[int]) -> Continuum:
    app = traced(exporter)

    @app.step(retries=2, backoff_s=600)
    def book(city: str) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the booking site is down")
        return f"booked {city}"

    @app.step
    def note(text: str) -> str:
        return text

    @app.task(state=Leg)
    def leg(ctx: TaskContext[Leg]) -> str:
        return note(f"leg to {ctx.state.city}")

    @app.task(state=Trip)
    def trip(ctx: TaskContext[Trip]) -> list[str]:
        ctx.state.notes.append(book(ctx.state.city))
        ctx.sleep(3600, name="nap")
        ctx.state.notes.append(ctx.invoke("leg", {"city": "Bergen"}))
        return ctx.state.notes

    return app


def test_a_task_across_invocations_is_one_trace_with_its_steps_attempts_waits_and_child(
    exporter,
):
    calls: list[int] = []
    app = trip_app(exporter, calls)
    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    task_id = app.client().start("trip", {}, task_id="trip-1")
    runtime.drive(task_id)
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED
    assert record.counters.invocations >= 3
    spans = list(exporter.get_finished_spans())
    trace_id = derived_trace_id(STACK, task_id)
    assert {s.context.trace_id for s in spans} == {trace_id}, "the child too is in the trace"
    for span in spans:
        assert span.attributes is not None
        assert span.attributes["continuum.task.id"] in (
            task_id,
            f"{task_id}.{span.attributes['continuum.task.id'].split('.', 1)[-1]}",
        )
        assert "continuum.task.name" in span.attributes
    assert_no_duplicates(spans)

    root = one(spans, "task trip")
    assert root.parent is None
    assert root.context.span_id == root_span_id(STACK, task_id)
    assert root.start_time == int(record.created_at.timestamp() * 1e9)
    assert root.status.status_code == StatusCode.OK

    ours = [s for s in answered(spans) if s.attributes["continuum.task.id"] == task_id]
    invocations = sorted(
        named(ours, "invocation"), key=lambda s: s.attributes["continuum.invocation.number"]
    )
    assert len(invocations) == record.counters.invocations
    assert [s.attributes["continuum.invocation.first"] for s in invocations] == [True] + [False] * (
        len(invocations) - 1
    )
    outcomes = [s.attributes["continuum.invocation.outcome"] for s in invocations]
    assert outcomes[0] == "waiting"  # the retry's backoff does not fit
    assert outcomes[-1] == "succeeded"
    assert "waiting" in outcomes
    assert all(
        s.parent is not None and s.parent.span_id == root.context.span_id for s in invocations
    )

    step = one(ours, "book")
    attempts = [one(ours, "book attempt 1"), one(ours, "book attempt 2")]
    assert step.attributes["continuum.step.key"] == "book#0"
    for attempt in attempts:
        assert attempt.parent is not None
        assert attempt.parent.span_id == step.context.span_id
        assert [link.context.span_id for link in attempt.links]
    assert attempts[0].status.status_code == StatusCode.ERROR
    # The step spans both invocations: from its first attempt to its last.
    assert step.start_time == attempts[0].start_time
    assert step.end_time == attempts[1].end_time
    linked = {a.links[0].context.span_id for a in attempts}
    assert linked == {invocations[0].context.span_id, invocations[1].context.span_id}

    nap = one(ours, "wait nap")
    assert 3600 <= seconds(nap) < 3700
    waiting = one(ours, "wait invoke.leg")
    assert waiting.attributes["continuum.wait.kind"] == "children"

    child_root = one(spans, "task leg")
    assert child_root.parent is not None
    assert child_root.parent.span_id == waiting.context.span_id
    child_steps = named(spans, "note")
    assert len(child_steps) == 1
    # Replayed steps emit nothing: one span per live execution, one per attempt.
    assert len(named(ours, "book")) == 1
    assert len(calls) == 2


def test_a_replay_after_a_suspension_adds_no_span(exporter):
    app = traced(exporter)

    @app.step
    def count(i: int) -> int:
        return i

    @app.task(state=Trip)
    def many(ctx: TaskContext[Trip]) -> int:
        total = 0
        for i in range(5):
            total += count(i)
            if i == 2 and not ctx.state.notes:
                ctx.state.notes.append("slept")
            ctx.sleep(60, name=f"pause{i}")
        return total

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    task_id = app.client().start("many", {}, task_id="many-1")
    runtime.drive(task_id)
    assert runtime.record(task_id).status == Status.SUCCEEDED
    spans = list(exporter.get_finished_spans())
    assert_no_duplicates(spans)
    assert len(named(spans, "count")) == 5
    assert len(named(spans, "count attempt 1")) == 5
    assert sorted(s.name for s in answered(spans) if s.name.startswith("wait ")) == [
        f"wait pause{i}" for i in range(5)
    ]


def test_a_crashed_invocation_is_reported_by_the_next(exporter):
    app = traced(exporter)
    deaths: list[int] = []

    @app.step
    def fragile() -> str:
        if not deaths:
            deaths.append(1)
            raise WorkerDied
        return "survived"

    @app.task(state=Trip)
    def crashy(ctx: TaskContext[Trip]) -> str:
        return fragile()

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    task_id = app.client().start("crashy", {}, task_id="crashy-1")
    assert drive_through_deaths(runtime, task_id) == 1
    assert runtime.record(task_id).status == Status.SUCCEEDED
    spans = list(exporter.get_finished_spans())
    assert_no_duplicates(spans)
    invocations = sorted(
        named(spans, "invocation"), key=lambda s: s.attributes["continuum.invocation.number"]
    )
    assert [s.attributes["continuum.invocation.outcome"] for s in invocations] == [
        "crashed",
        "succeeded",
    ]
    assert invocations[0].status.status_code == StatusCode.ERROR
    assert invocations[0].attributes["continuum.invocation.first"] is True
    assert {s.context.trace_id for s in spans} == {derived_trace_id(STACK, task_id)}
    assert len(named(spans, "fragile")) == 1  # the dead attempt was never reported


def test_a_failed_task_has_an_error_root_and_a_failed_step(exporter):
    app = traced(exporter)

    @app.step
    def refuse() -> str:
        raise ValueError("no such city")

    @app.task(state=Trip)
    def doomed(ctx: TaskContext[Trip]) -> str:
        return refuse()

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    task_id = app.client().start("doomed", {}, task_id="doomed-1")
    runtime.drive(task_id)
    assert runtime.record(task_id).status == Status.FAILED
    spans = list(exporter.get_finished_spans())
    root = one(spans, "task doomed")
    assert root.status.status_code == StatusCode.ERROR
    assert "no such city" in (root.status.description or "")
    assert one(spans, "refuse").status.status_code == StatusCode.ERROR
    assert one(spans, "invocation").attributes["continuum.invocation.outcome"] == "failed"


def test_a_task_started_inside_a_span_links_its_trace_to_it(exporter):
    app = traced(exporter)

    @app.task(state=Trip)
    def quick(ctx: TaskContext[Trip]) -> str:
        return ctx.state.city

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    from opentelemetry import trace

    with trace.use_span(
        provider.get_tracer("api").start_span("POST /trips"), end_on_exit=True
    ) as request:
        task_id = app.client().start("quick", {}, task_id="quick-1")
    record = runtime.record(task_id)
    caller = request.get_span_context()
    flags = int(caller.trace_flags)
    assert record.traceparent == f"00-{caller.trace_id:032x}-{caller.span_id:016x}-{flags:02x}"
    runtime.drive(task_id)
    root = one(list(exporter.get_finished_spans()), "task quick")
    assert root.context.trace_id == derived_trace_id(STACK, task_id)
    assert [link.context.span_id for link in root.links] == [caller.span_id]


#: A task traced in a fresh interpreter: prints each span's name, trace id and span id.
FRESH_PROCESS = """
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from continuum import Continuum, TaskContext
from continuum.integrations.opentelemetry import Tracing
from tests.support import LocalRuntime

class Trip(BaseModel):
    city: str = "Oslo"

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
app = Continuum()
app.observe(Tracing(tracer_provider=provider))

@app.task(state=Trip)
def quick(ctx: TaskContext[Trip]) -> str:
    return ctx.state.city

runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
runtime.drive(app.client().start("quick", {}, task_id="same-id"))
for span in exporter.get_finished_spans():
    print("SPAN", span.name, span.context.trace_id, span.context.span_id)
"""


def test_a_fresh_process_derives_the_same_trace_and_span_ids(exporter):
    out = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, check=True
    )
    lines = [line[5:] for line in out.stdout.splitlines() if line.startswith("SPAN ")]
    there = sorted(tuple(line.rsplit(" ", 2)) for line in lines)
    app = traced(exporter)

    @app.task(state=Trip)
    def quick(ctx: TaskContext[Trip]) -> str:
        return ctx.state.city

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    runtime.drive(app.client().start("quick", {}, task_id="same-id"))
    spans = exporter.get_finished_spans()
    here = sorted((s.name, str(s.context.trace_id), str(s.context.span_id)) for s in spans)
    assert [name for name, _, _ in here] == ["invocation", "task quick"]
    assert here == there
    assert {int(trace) for _, trace, _ in here} == {derived_trace_id(STACK, "same-id")}


def test_tracing_wants_step_events_and_a_plain_app_skips_them():
    from continuum._define.observers import Observers

    plain = Observers()
    assert not plain.steps
    plain.add(Tracing(tracer_provider=TracerProvider()))
    assert plain.steps


def test_powertools_log_lines_carry_the_trace_and_span_ids_while_a_span_is_open(exporter):
    seen: list[dict[str, Any]] = []

    class Keys:
        def append_keys(self, **keys: Any) -> None:
            seen.append(dict(keys))

        def remove_keys(self, keys: list[str]) -> None:
            seen.append({})

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider, logger=Keys()))

    @app.step
    def hop() -> int:
        return 1

    @app.task(state=Trip)
    def hopper(ctx: TaskContext[Trip]) -> int:
        return hop()

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    runtime.drive(app.client().start("hopper", {}, task_id="hopper-1"))
    spans = list(exporter.get_finished_spans())
    attempt = one(spans, "hop attempt 1")
    trace_hex = f"{derived_trace_id(STACK, 'hopper-1'):032x}"
    assert {"trace_id": trace_hex, "span_id": f"{attempt.context.span_id:016x}"} in seen
    assert seen[-1] == {}  # the invocation's span closed: the keys go


def test_a_map_whose_items_wait_replays_finished_items_without_new_spans(exporter):
    app = traced(exporter)

    @app.step
    def fetch(i: int) -> int:
        return i * 10

    def item(ctx: TaskContext[Trip], value: int, index: int) -> int:
        got = fetch(value)
        ctx.sleep(60 * (index + 1), name="cool")
        return got

    @app.task(state=Trip)
    def fan(ctx: TaskContext[Trip]) -> list[int]:
        return ctx.map([1, 2, 3], item, name="each").values()

    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    task_id = app.client().start("fan", {}, task_id="fan-1")
    runtime.drive(task_id)
    assert runtime.record(task_id).result == [10, 20, 30]
    assert runtime.record(task_id).counters.invocations > 1
    spans = list(exporter.get_finished_spans())
    assert_no_duplicates(spans)
    assert len(named(spans, "fetch")) == 3
    assert len(named(answered(spans), "wait cool")) == 3
    items = sorted(s.name for s in spans if s.attributes.get("continuum.context.kind") == "item")
    assert items == ["item 0", "item 1", "item 2"]
    batch = one(spans, "each")
    by_id = {s.context.span_id: s for s in spans}
    for step in named(spans, "fetch"):
        holder = by_id[step.parent.span_id]
        assert holder.attributes["continuum.context.kind"] == "item"
        assert holder.parent.span_id == batch.context.span_id
