"""Spans reach the tracer when a write of the record holds what they ended, where the
provider's pipeline cannot tell when a span was made: nothing of a step lives in the SDK while
it runs, yet its log lines name its attempt's span. A pipeline that can tell gets each span
started where and when it starts."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum.integrations.opentelemetry import Tracing
from tests.support import LocalRuntime
from tests.tracing.conftest import attribute, one, spans_of


class Plan(BaseModel):
    city: str = "Oslo"


class Started(SpanProcessor):
    """The names of the spans the SDK started, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.names.append(span.name)


class Keys:
    """A logger that keeps the keys it was given."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def append_keys(self, **keys: Any) -> None:
        self.seen.append(dict(keys))

    def remove_keys(self, keys: list[str]) -> None:
        self.seen.append({})


def test_with_the_sdks_own_pipeline_a_running_steps_spans_reach_the_sdk_once_a_write_holds_them(
    exporter, naming, aws, monkeypatch
):
    started = Started()
    # the export processor's own on_start, watched: the pipeline stays the SDK's alone
    monkeypatch.setattr(
        SimpleSpanProcessor, "on_start", lambda _, span, parent_context=None: started.on_start(span)
    )
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    keys = Keys()
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider, logger=keys, naming=naming))
    during: list[list[str]] = []
    logged: list[dict[str, Any]] = []

    @app.step
    def book(city: str) -> str:
        during.append(list(started.names))
        logged.append(keys.seen[-1])
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        return book(ctx.state.city)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-made-late"))
    assert runtime.record("trip-made-late").status == Status.SUCCEEDED
    invocation = "invocation" if naming == "continuum" else "Invocation"
    assert during == [[invocation]]
    attempt = one(spans_of(exporter), "book attempt 1")
    assert logged == [
        {
            "trace_id": f"{attempt.context.trace_id:032x}",
            "span_id": f"{attempt.context.span_id:016x}",
        }
    ]


def test_a_processor_that_reads_a_spans_start_sees_a_steps_attempt_start_as_the_step_starts(
    exporter, naming, aws
):
    started = Started()
    provider = TracerProvider()
    provider.add_span_processor(started)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    keys = Keys()
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider, logger=keys, naming=naming))
    during: list[list[str]] = []
    logged: list[dict[str, Any]] = []

    @app.step
    def book(city: str) -> str:
        during.append(list(started.names))
        logged.append(keys.seen[-1])
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        return book(ctx.state.city)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-made-live"))
    assert runtime.record("trip-made-live").status == Status.SUCCEEDED
    invocation = "invocation" if naming == "continuum" else "Invocation"
    assert during == [[invocation, "book attempt 1"]]
    attempt = one(spans_of(exporter), "book attempt 1")
    assert logged == [
        {
            "trace_id": f"{attempt.context.trace_id:032x}",
            "span_id": f"{attempt.context.span_id:016x}",
        }
    ]


class OwnIds:
    """A provider whose tracer chooses its own ids (not the SDK's tracer)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        tracer = self.provider.get_tracer(*args, **kwargs)

        class Tracer:
            def start_span(self, *args: Any, **kwargs: Any) -> Any:
                return tracer.start_span(*args, **kwargs)

        return Tracer()


def test_with_a_tracer_that_chooses_its_ids_a_steps_log_lines_name_its_attempts_span(exporter, aws):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    keys = Keys()
    app = Continuum()
    app.observe(Tracing(tracer_provider=OwnIds(provider), logger=keys))  # type: ignore[arg-type]
    logged: list[dict[str, Any]] = []

    @app.step
    def book(city: str) -> str:
        logged.append(keys.seen[-1])
        return f"booked {city}"

    @app.task(state=Plan)
    def trip(ctx: TaskContext[Plan]) -> str:
        return book(ctx.state.city)

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("trip", {}, task_id="trip-own-ids"))
    assert runtime.record("trip-own-ids").status == Status.SUCCEEDED
    attempt = one(spans_of(exporter), "book attempt 1")
    assert attribute(attempt, "continuum.attempt.outcome") == "ok"
    assert attempt.status.is_ok
    assert logged == [
        {
            "trace_id": f"{attempt.context.trace_id:032x}",
            "span_id": f"{attempt.context.span_id:016x}",
        }
    ]
