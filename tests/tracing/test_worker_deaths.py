"""A worker that dies, or is fenced, sends nothing its record does not hold: the redo, or the
worker that took the task, sends it, once, under its own ids."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._define.events import InvocationEnded, InvocationStarted
from continuum._local.lambda_emulation import LocalLambdaContext
from continuum.integrations.opentelemetry import Tracing
from tests.conftest import continuation, share, sqs_event
from tests.integrations.conftest import WorkerDied, drive_through_deaths
from tests.support import LocalRuntime
from tests.tracing.conftest import doubled, named, provider_of, spans_of


class Plan(BaseModel):
    city: str = "Oslo"


@pytest.mark.parametrize("before_death", ["child context", "answered sleep", "retried step"])
def test_what_ended_before_a_worker_died_unsaved_is_sent_once_by_the_redo(
    traced, exporter, naming, aws, before_death
):
    app = traced(naming)
    deaths: list[int] = []
    calls: list[int] = []

    @app.step
    def look() -> str:
        return "x"

    @app.step(retries=1, backoff_s=1200)
    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("down")
        return "up"

    @app.step
    def fragile() -> str:
        if not deaths:
            deaths.append(1)
            raise WorkerDied
        return "survived"

    @app.task(state=Plan)
    def job(ctx: TaskContext[Plan]) -> str:
        if before_death == "child context":
            ctx.child_context(lambda c: look(), name="block")
        elif before_death == "answered sleep":
            ctx.sleep(600, name="nap")
        else:
            flaky()
        return fragile()

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    assert drive_through_deaths(runtime, app.client().start("job", {}, task_id="died-1")) == 1
    spans = spans_of(exporter)
    assert doubled(spans) == []
    assert len(named(spans, "fragile")) == 1


def _slow_job(app: Continuum, on_call: Callable[[int], None]) -> None:
    calls: list[int] = []

    @app.step
    def slow() -> str:
        calls.append(1)
        on_call(len(calls))
        return "done"

    @app.task(state=Plan)
    def job(ctx: TaskContext[Plan]) -> str:
        return slow()


def test_a_fenced_worker_sends_nothing_the_crash_report_of_it_sends(traced, exporter, naming, aws):
    app, other_env = traced(naming), traced(naming)
    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    share(other_env, runtime)

    def stall(n: int) -> None:
        if n != 1:
            return
        # this worker stalls past its lease; another environment takes the task meanwhile
        runtime.time.advance(120)
        body = continuation("stale-1", runtime.record("stale-1").generation)
        event = sqs_event(body, message_ids=["m-2"])
        taker = threading.Thread(target=lambda: other_env.handler(event, LocalLambdaContext(30)))
        taker.start()
        taker.join(60)

    _slow_job(app, stall)
    _slow_job(other_env, lambda n: None)
    with runtime.time.running():
        app.client().start("job", {}, task_id="stale-1")
        runtime.invoke_once()
    assert runtime.record("stale-1").status == Status.SUCCEEDED
    spans = spans_of(exporter)
    assert doubled(spans) == []
    invocations = [s for s in spans if s.name.lower() == "invocation"]
    assert sorted(s.status.status_code.name for s in invocations) == ["ERROR", "OK"]
    assert len(named(spans, "slow")) == 1


def test_a_stale_workers_end_in_the_same_process_leaves_the_new_workers_invocation_alone(
    exporter,
):
    tracing = Tracing(tracer_provider=provider_of(exporter))

    def started(number: int, request_id: str) -> InvocationStarted:
        return InvocationStarted(
            "shared-1", "job", number, 0, "continue", number == 1, number, request_id,
            100.0, 100.0 + number, stack="memory/tasks",
        )  # fmt: skip

    def ended(number: int, request_id: str, outcome: str) -> InvocationEnded:
        return InvocationEnded(
            "shared-1", "job", outcome, 1.0, 0, 0, number, request_id, 100.0 + number, 110.0
        )

    tracing.invocation_started(started(1, "stale"))
    tracing.invocation_started(started(2, "taker"))  # the lease expired: another took it
    tracing.invocation_ended(ended(1, "stale", "fenced"))
    tracing.invocation_ended(ended(2, "taker", "suspended"))
    [invocation] = spans_of(exporter)
    assert invocation.attributes is not None
    assert invocation.attributes["continuum.invocation.number"] == 2
