"""Tasks with a life worth drawing, run on the local runtime's virtual clock.

``report`` fetches twelve pages over several invocations (a small budget), its worker dies once
in the middle of a fetch, it sleeps two days, waits for a person's approval (a callback) and
then fails to publish. ``ask`` waits for a callback at once, ``hold`` for a signal;
``tally`` suspends a few times and succeeds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._local.runtime import waits_for_outside
from continuum._ops.inspection import TaskView
from tests.support import LocalRuntime, inspect_task

#: The step that kills its worker the first time it runs.
DIES_AT_PAGE = 5
#: What makes the report fail at the end.
PUBLISH_ERROR = "the press rejected the report: no sources"


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process (a BaseException: nothing in the worker catches it)."""


class Report(BaseModel):
    topic: str
    wanted: int = 12
    pages: list[str] = []
    slept: bool = False
    approval: Any = None


class Ask(BaseModel):
    note: str = ""
    answer: Any = None


class Tally(BaseModel):
    n: int = 5
    total: int = 0
    done: int = 0


def timeline_app() -> Continuum:
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)
    deaths: list[int] = []

    @app.step
    def fetch(topic: str, page: int) -> str:
        time.sleep(0.04)
        if page == DIES_AT_PAGE and not deaths:
            deaths.append(page)
            raise WorkerDied
        return f"{topic}: page {page}"

    @app.step
    def hand_out(callback_id: str) -> str:
        return callback_id

    @app.step
    def publish(pages: list[str]) -> str:
        raise ValueError(PUBLISH_ERROR)

    @app.task(state=Report)
    def report(ctx: TaskContext[Report]) -> str | None:
        s = ctx.state
        if len(s.pages) < s.wanted:
            s.pages.append(fetch(s.topic, len(s.pages)))
            s.pages.append(fetch(s.topic, len(s.pages)))
            return None
        if not s.slept:
            ctx.sleep(timedelta(days=2), name="cool-off")
            s.slept = True
            return None
        if s.approval is None:
            s.approval = ctx.wait_for_callback(hand_out, name="approve")
            return None
        return publish(s.pages)

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> Any:
        ctx.state.answer = ctx.wait_for_callback(hand_out, name="approve")
        return ctx.state.answer

    @app.task(state=Ask)
    def hold(ctx: TaskContext[Ask]) -> Any:
        signal = ctx.wait_for_signal("go")
        return None if signal is None else signal.payload

    @app.step
    def add(total: int, i: int) -> int:
        time.sleep(0.03)
        return total + i

    @app.task(state=Tally)
    def tally(ctx: TaskContext[Tally]) -> int | None:
        s = ctx.state
        s.total = add(s.total, s.done)
        s.done += 1
        return s.total if s.done >= s.n else None

    return app


@dataclass
class Lived:
    """A task that ran, and what to look at."""

    runtime: LocalRuntime
    task_id: str
    view: TaskView


def run_until_settled(runtime: LocalRuntime, task_id: str) -> None:
    """Invoke until the task finishes or waits for the outside world; a dead worker's
    message comes back after the visibility timeout, as on AWS."""
    for _ in range(2000):  # a two-day sleep is 192 timer hops
        record = runtime.record(task_id)
        if record.status.finished:
            return
        try:
            if runtime.invoke_once() is None:
                if waits_for_outside(record):
                    return
                due = runtime.next_due()
                if due is None:
                    return
                runtime.time.wait_until(due, poll_s=0.01)
        except WorkerDied:
            runtime.time.advance(runtime.visibility_timeout_s + 1)
    raise AssertionError(f"task {task_id} did not settle")


def live_report(backend: str = "memory", *, answer: Any = "approved") -> Lived:
    """Run ``report`` through its whole life: pages, a death, two days' sleep, a callback
    answered (unless ``answer`` is None), and the failure."""
    app = timeline_app()
    runtime = LocalRuntime(app, budget_s=0.3, backend=backend, virtual_time=True)  # type: ignore[arg-type]
    client = app.client()
    with runtime.time.running():
        task_id = client.start("report", {"topic": "tides"}, task_id="tides-report")
        run_until_settled(runtime, task_id)
        if answer is not None:
            runtime.time.advance(3 * 3600)  # the person answers three hours later
            [waiter] = [w for w in client.status(task_id).waiting_for if w.kind == "callback"]
            client.complete_callback(waiter.id or "", answer)
            run_until_settled(runtime, task_id)
    return Lived(runtime, task_id, inspect_task(runtime.observer, task_id, versions=1000))


def live_ask(note: str = "", *, task: str = "ask", task_id: str = "ask-1") -> Lived:
    """``ask`` (or ``hold``), left waiting for its callback (or its signal)."""
    app = timeline_app()
    runtime = LocalRuntime(app, budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running():
        runtime.run(task, {"note": note}, task_id=task_id)
    return Lived(runtime, task_id, inspect_task(runtime.observer, task_id))


def live_tally(backend: str = "memory") -> Lived:
    app = timeline_app()
    runtime = LocalRuntime(app, budget_s=0.1, backend=backend, virtual_time=True)  # type: ignore[arg-type]
    with runtime.time.running():
        summary = runtime.run("tally", {"n": 5}, task_id="tally-1")
    return Lived(runtime, summary.task_id, inspect_task(runtime.observer, summary.task_id))


#: A step name as long as the ones pydantic-ai's integration journals.
LONG_STEP = "agent.support_triage.model_request.tool_call.policy_check_against_the_refund_rules"


class Checks(BaseModel):
    claims: list[str] = ["refund", "exchange", "repair"]


def checks_app() -> Continuum:
    """``checks``: one ``ctx.map`` item per claim, each running the same step; ``hold`` (a
    signal it never gets) to cancel."""
    app = timeline_app()

    @app.step(name=LONG_STEP)
    def policy_check(claim: str) -> dict[str, Any]:
        return {"claim": claim, "allowed": claim != "repair", "rule": f"rule for {claim}"}

    def check_one(ctx: TaskContext[Checks], claim: str, index: int) -> dict[str, Any]:
        return policy_check(claim)

    @app.task(state=Checks)
    def checks(ctx: TaskContext[Checks]) -> list[Any]:
        checked = ctx.map(ctx.state.claims, check_one, name="claims").values()
        return [*checked, policy_check("all of them")]

    return app


def live_checks() -> Lived:
    runtime = LocalRuntime(checks_app(), budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running():
        summary = runtime.run("checks", {}, task_id="checks-1")
    assert summary.status == "succeeded", summary.error
    return Lived(runtime, summary.task_id, inspect_task(runtime.observer, summary.task_id))


def live_cancelled(reason: str) -> Lived:
    """``hold``, waiting for its signal, cancelled with ``reason``."""
    runtime = LocalRuntime(timeline_app(), budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running():
        runtime.run("hold", {}, task_id="hold-1")
        runtime.app.client().cancel("hold-1", reason)
        runtime.drive("hold-1")
    return Lived(runtime, "hold-1", inspect_task(runtime.observer, "hold-1"))


def live_answered() -> Lived:
    """``ask``: its callback answered, then succeeded."""
    lived = live_ask()
    with lived.runtime.time.running():
        client = lived.runtime.app.client()
        [waiter] = [w for w in client.status("ask-1").waiting_for if w.kind == "callback"]
        client.complete_callback(waiter.id or "", {"approved": True})
        lived.runtime.drive("ask-1")
    return Lived(lived.runtime, "ask-1", inspect_task(lived.runtime.observer, "ask-1"))
