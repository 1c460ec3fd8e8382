"""Preemptible steps are interrupted before the deadline; cooperative steps pause themselves.

Every test runs in both flavours (``tests/flavours.py``). In the async twin the step is
``async def`` and awaits its work: a preemptible one is cancelled at its limit (an asyncio
timeout, no alarm signal), its partial work discarded, and it runs again whole next time.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext, current_context
from tests.conftest import ScriptedContext, drain
from tests.flavours import FLAVOURS
from tests.support import (
    Budget,
    LocalRuntime,
    Returned,
    StepStats,
    Suspended,
    TaskRecord,
    TurnLoop,
    observe,
)


class Empty(BaseModel):
    pass


def build(preemptible: bool, flavour: str = "sync"):
    app = Continuum(bucket="unused", queue_url="unused")
    finished: list[str] = []

    if flavour == "sync":

        @app.step
        def warm_up() -> int:
            return 1

        @app.step(preemptible=preemptible)
        def crunch() -> str:
            time.sleep(0.6)  # far longer than its history says
            finished.append("crunch")
            return "crunched"

        @app.task(state=Empty)
        def job(ctx: TaskContext[Empty]) -> str:
            warm_up()
            return crunch()

    else:

        @app.step
        async def warm_up() -> int:
            return 1

        @app.step(preemptible=preemptible)
        async def crunch() -> str:
            await asyncio.sleep(0.6)  # far longer than its history says
            finished.append("crunch")
            return "crunched"

        @app.task(state=Empty)
        async def job(ctx: TaskContext[Empty]) -> str:
            await warm_up()
            return await crunch()

    record = TaskRecord(task_id="p", task_name="job", state={})
    for _ in range(5):
        observe(record.step_stats.setdefault("crunch", StepStats()), 0.05)
        observe(record.save_stats, 0.01)
    return app.tasks["job"], record, finished


def budget_of(seconds: float) -> Budget:
    deadline = time.monotonic() + seconds
    return Budget(remaining=lambda: deadline - time.monotonic(), margin_s=0.05)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_preemptible_step_is_interrupted_and_runs_again_next_time(flavour):
    task, record, finished = build(preemptible=True, flavour=flavour)
    outcome = TurnLoop(task, record, budget_of(0.3), lambda: None, 60).run()

    assert isinstance(outcome, Suspended)
    assert "preempted step 'crunch#1'" in outcome.reason
    assert finished == []  # interrupted inside the sleep, its partial work discarded
    assert record.counters.preemptions == 1
    assert 0.1 < record.counters.preempted_s < 0.3
    assert [e.key for e in record.journal] == ["warm_up#0"]  # crunch was not recorded
    assert record.step_stats["crunch"].max_s >= record.counters.preempted_s

    # The next invocation has the time: the step runs again, whole.
    outcome = TurnLoop(task, record, budget_of(5.0), lambda: None, 60).run()
    assert isinstance(outcome, Returned)
    assert record.result == "crunched"
    assert finished == ["crunch"]
    assert record.counters.steps_replayed == 1


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_that_is_not_preemptible_is_never_interrupted(flavour):
    task, record, finished = build(preemptible=False, flavour=flavour)
    outcome = TurnLoop(task, record, budget_of(0.3), lambda: None, 60).run()
    assert isinstance(outcome, Returned)
    assert finished == ["crunch"]
    assert record.counters.preemptions == 0


class Download(BaseModel):
    pages: int = 10


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_cooperative_step_spans_invocations_from_its_cursor(aws, flavour):
    app = Continuum()
    fetched: list[int] = []

    def pages_from_cursor(pages: int) -> list[int]:
        ctx = current_context()
        got: list[int] = list(ctx.cursor or [])
        while len(got) < pages:
            if ctx.remaining() < 1:
                ctx.pause(got)  # save the cursor; continue in the next invocation
            fetched.append(len(got))
            got.append(len(got) * 10)
        return got

    if flavour == "sync":

        @app.step
        def download(pages: int) -> list[int]:
            return pages_from_cursor(pages)

        @app.task(state=Download)
        def mirror(ctx: TaskContext[Download]) -> int:
            return sum(download(ctx.state.pages))

    else:

        @app.step
        async def download(pages: int) -> list[int]:
            return pages_from_cursor(pages)

        @app.task(state=Download)
        async def mirror(ctx: TaskContext[Download]) -> int:
            return sum(await download(ctx.state.pages))

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("mirror", {"pages": 10}, task_id="mirror-1")
    # Each invocation has time for three pages.
    record = drain(runtime, task_id, lambda i: ScriptedContext(3, executed=lambda: len(fetched)))

    assert record.status == Status.SUCCEEDED
    assert record.result == sum(range(0, 100, 10))
    assert fetched == list(range(10))  # no page fetched twice
    assert record.counters.continuations == 3
