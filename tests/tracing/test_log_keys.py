"""Log lines carry the span they are written in: the running step attempt's, whatever other
attempt runs beside it (``ctx.map`` items on threads)."""

from __future__ import annotations

import io
import json
import logging
import threading

from aws_lambda_powertools import Logger
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum.integrations.opentelemetry import Tracing
from tests.support import LocalRuntime
from tests.tracing.conftest import provider_of, spans_of


class Plan(BaseModel):
    city: str = "Oslo"


def test_log_lines_of_steps_running_side_by_side_carry_their_own_attempts_span(exporter, aws):
    out = io.StringIO()
    # a service of its own: Powertools keeps the first handler of a service name
    log = Logger(service=f"log-keys-{aws}", logger_handler=logging.StreamHandler(out))
    app = Continuum()
    app.observe(Tracing(tracer_provider=provider_of(exporter), logger=log))
    both_started = threading.Barrier(2, timeout=10)
    first_logged = threading.Event()

    @app.step
    def work(i: int) -> int:
        both_started.wait()
        if i == 1:
            first_logged.wait(10)  # item 0 logs and returns first, then item 1 logs
        log.info("working", item=i)
        if i == 0:
            first_logged.set()
        return i

    def item(ctx: TaskContext[Plan], i: int, index: int) -> int:
        return work(i)

    @app.task(state=Plan)
    def fan(ctx: TaskContext[Plan]) -> list[int]:
        return ctx.map([0, 1], item, name="items", max_concurrency=2).values()

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("fan", {}, task_id="logs-1"))
    assert runtime.record("logs-1").status == Status.SUCCEEDED
    attempts = {
        s.attributes["continuum.step.key"]: f"{s.context.span_id:016x}"
        for s in spans_of(exporter)
        if s.name == "work attempt 1" and s.attributes is not None
    }
    lines = [json.loads(line) for line in out.getvalue().splitlines() if '"working"' in line]
    logged = {f"items#0/{line['item']}/work#0": line.get("span_id") for line in lines}
    assert logged == attempts
