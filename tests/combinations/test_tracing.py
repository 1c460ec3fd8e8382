"""Each flavour and shape traced with OpenTelemetry (an in-memory exporter): one trace per
task, one root span per task (a child task's hangs under its parent's wait), no span sent
twice, and the root ending after everything in it; a retried task's trace too."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from continuum import Status
from continuum.integrations.opentelemetry import Tracing
from continuum.testing import TaskRunner
from tests.combinations.shapes import EVERY_COMBINATION, INPUT, TASK_ID, Combo

pytestmark = EVERY_COMBINATION


def traced(combo: Combo) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    combo.app.observe(Tracing(tracer_provider=provider))
    return exporter


def assert_one_trace_per_task(
    combo: Combo, spans: tuple[ReadableSpan, ...], *, runs: int = 1
) -> None:
    roots = Counter(span.name for span in spans if span.name.startswith("task "))
    wanted = {"task job": runs, **({"task helper": 1} if combo.shape == "child" else {})}
    assert roots == wanted, f"root spans: {roots}"
    ids = Counter(span.context.span_id for span in spans)
    assert not [n for n in ids.values() if n > 1], "spans sent twice: " + ", ".join(
        f"{span.name}" for span in spans if ids[span.context.span_id] > 1
    )
    assert len({span.context.trace_id for span in spans}) == 1
    root = max((span for span in spans if span.name == "task job"), key=lambda s: s.end_time or 0)
    last = max(span.end_time or 0 for span in spans if span.name == "invocation")
    assert root.end_time is not None
    assert root.end_time >= last, "the root ends before its last invocation"


def test_traced_run_is_one_trace_with_one_root_per_task(combo: Combo, backend: str):
    exporter = traced(combo)
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        task = combo.answer(runner.run("job", INPUT, task_id=TASK_ID))
        assert (task.status, task.result) == (Status.SUCCEEDED, combo.result)
    assert_one_trace_per_task(combo, exporter.get_finished_spans())


def test_traced_retry_stays_one_trace_with_one_root_per_run(combo: Combo, backend: str):
    exporter = traced(combo)
    combo.probe.broken = {"finish"}
    with TaskRunner(combo.app, backend=backend, timeout_s=10) as runner:
        task = combo.answer(runner.run("job", INPUT, task_id=TASK_ID))
        assert task.status == Status.FAILED
        combo.probe.broken.clear()
        runner.client.retry(TASK_ID)
        task = combo.answer(task.run())
        assert (task.status, task.result) == (Status.SUCCEEDED, combo.result)
    spans = exporter.get_finished_spans()
    assert_one_trace_per_task(combo, spans, runs=2)  # docs/tracing.md: a retry is a new run
    failed, retried = sorted(
        (s for s in spans if s.name == "task job"), key=lambda s: s.start_time or 0
    )
    assert [link.context.span_id for link in retried.links] == [failed.context.span_id]
