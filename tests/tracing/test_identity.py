"""One trace per task, and only that task's: ids derive from the stack and the task id, alike in
every process and invocation, and apart between stacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from continuum import TaskContext
from tests.support import LocalRuntime
from tests.tracing.conftest import spans_of


class Night(BaseModel):
    day: str = "2027-01-15"


def test_two_stacks_running_one_task_id_send_two_traces(traced, exporter, naming, aws):
    roots = {}
    for prefix in ("staging", "production"):
        app = traced(naming, prefix=prefix)

        @app.task(state=Night)
        def nightly(ctx: TaskContext[Night]) -> str:
            ctx.sleep(60, name="settle")
            return ctx.state.day

        runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
        runtime.drive(app.client().start("nightly", {}, task_id="nightly-20270115T020000Z"))
        roots[prefix] = {s.context.trace_id for s in spans_of(exporter)}
        exporter.clear()
    assert len(roots["staging"]) == len(roots["production"]) == 1
    assert roots["staging"] != roots["production"]


#: The same task traced in a fresh interpreter: prints each span's name, trace and span id.
FRESH_PROCESS = """
import sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from continuum import Continuum
from continuum.integrations.opentelemetry import Tracing
from tests.support import LocalRuntime
from tests.tracing.test_identity import nightly_task

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
app = Continuum(prefix="production")
app.observe(Tracing(tracer_provider=provider, naming=sys.argv[1]))
nightly_task(app)
runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
runtime.drive(app.client().start("nightly", {}, task_id="nightly-1"))
for span in exporter.get_finished_spans():
    print("SPAN", span.name, span.context.trace_id, span.context.span_id)
"""


def nightly_task(app: Any) -> None:
    @app.task(state=Night)
    def nightly(ctx: TaskContext[Night]) -> str:
        ctx.sleep(60, name="settle")
        return ctx.state.day


def test_a_fresh_process_sends_the_same_trace_and_span_ids(traced, exporter, naming):
    out = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, naming],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    there = sorted(
        tuple(line[5:].rsplit(" ", 2))
        for line in out.stdout.splitlines()
        if line.startswith("SPAN ")
    )
    app = traced(naming, prefix="production")
    nightly_task(app)
    runtime = LocalRuntime(app, budget_s=30, backend="memory", virtual_time=True)
    runtime.drive(app.client().start("nightly", {}, task_id="nightly-1"))
    here = sorted(
        (s.name, str(s.context.trace_id), str(s.context.span_id)) for s in spans_of(exporter)
    )
    assert [name for name, _, _ in here] == [name for name, _, _ in there]
    assert {trace for _, trace, _ in here} == {trace for _, trace, _ in there}
    # the root and the invocations are named by the task alone; a wait also by when it was
    # first reached (read from the record by every later invocation)
    lasting = {"task nightly", "invocation", "Workflow", "Invocation"}
    assert [s for s in here if s[0] in lasting] == [s for s in there if s[0] in lasting]


def test_span_ids_are_those_earlier_versions_derived_so_a_running_task_keeps_its_trace():
    from continuum._base.trace_ids import root_span_id, run_span_id, wait_span_id

    step = ("step", 3, "book#0", 1700000000.25)
    assert run_span_id("b/tasks", "t-1", 0, *step) == 14338509867396601808
    assert run_span_id("b/tasks", "t-1", 2, *step) == 8271634892060664309
    assert root_span_id("b/tasks", "t-1", 1) == 13359614044912538075
    assert wait_span_id("b/tasks", "t-1", 0, "nap#1", 1700000000.5) == 3301032250428527813
