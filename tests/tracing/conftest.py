"""Traces as a collector reads them: the spans ``Tracing`` exported, in memory, in both naming
modes (continuum's own and AWS's durable-execution model), on both backends."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from continuum import Continuum
from continuum.integrations.opentelemetry import Tracing

NAMINGS = ("continuum", "aws")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(params=NAMINGS)
def naming(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def provider_of(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def traced(exporter: InMemorySpanExporter) -> Callable[..., Continuum]:
    """``traced(naming="aws", prefix="staging")``: an app whose spans go to ``exporter``."""

    def make(naming: str = "continuum", **options: Any) -> Continuum:
        app = Continuum(**options)
        named = {} if naming == "continuum" else {"naming": naming}  # the default, unsaid
        app.observe(Tracing(tracer_provider=provider_of(exporter), **named))
        return app

    return make


def spans_of(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {sorted(s.name for s in spans)}"
    return found[0]


def attribute(span: ReadableSpan, name: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(name)


def doubled(spans: list[ReadableSpan]) -> list[str]:
    """The spans sent more than once (one trace and span id on two exports)."""
    ids = Counter((s.context.trace_id, s.context.span_id) for s in spans)
    return sorted(s.name for s in spans if ids[s.context.trace_id, s.context.span_id] > 1)


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    found = [s for s in spans if s.context.span_id == span.parent.span_id]
    assert len(found) == 1, f"the parent of {span.name!r} was sent {len(found)} times"
    return found[0]


def assert_parents_contain_children(spans: list[ReadableSpan]) -> None:
    by_id = {s.context.span_id: s for s in spans}
    for span in spans:
        above = by_id.get(span.parent.span_id) if span.parent is not None else None
        if above is None:
            continue
        assert None not in (above.start_time, span.start_time, above.end_time, span.end_time)
        assert above.start_time <= span.start_time, f"{span.name} starts before {above.name}"
        assert span.end_time <= above.end_time, f"{span.name} ends after {above.name}"
