"""Preemptible steps are interrupted before the deadline; cooperative steps pause themselves.

Every test runs in both flavours (``tests/flavours.py``). In the async twin the step is
``async def`` and awaits its work: a preemptible one is cancelled at its limit (an asyncio
timeout, no alarm signal), its partial work discarded, and it runs again whole next time.
Async only, as a sync task has no counterpart (its alarm reaches the main thread alone): a
preemptible step cancelled among others, in ``map_async`` items and in ``asyncio.gather``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from continuum import Continuum, Settings, Status, TaskContext, current_context
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
    outcome = TurnLoop(
        task, record, budget_of(0.3), lambda: None, Settings(persist_every_s=60)
    ).run()

    assert isinstance(outcome, Suspended)
    assert "preempted step 'crunch#1'" in outcome.reason
    assert finished == []  # interrupted inside the sleep, its partial work discarded
    assert record.counters.preemptions == 1
    assert 0.1 < record.counters.preempted_s < 0.3
    assert [e.key for e in record.journal] == ["warm_up#0"]  # crunch was not recorded
    assert record.step_stats["crunch"].max_s >= record.counters.preempted_s

    # The next invocation has the time: the step runs again, whole.
    outcome = TurnLoop(
        task, record, budget_of(5.0), lambda: None, Settings(persist_every_s=60)
    ).run()
    assert isinstance(outcome, Returned)
    assert record.result == "crunched"
    assert finished == ["crunch"]
    assert record.counters.steps_replayed == 1


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_that_is_not_preemptible_is_never_interrupted(flavour):
    task, record, finished = build(preemptible=False, flavour=flavour)
    outcome = TurnLoop(
        task, record, budget_of(0.3), lambda: None, Settings(persist_every_s=60)
    ).run()
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


# -- async only: preemption among asyncio tasks ------------------------------------------------


def gathered(where: str):
    """An async task whose preemptible step runs beside others: in ``map_async`` items or in
    ``asyncio.gather``; the call for ``2`` overruns the first time only."""
    app = Continuum(bucket="unused", queue_url="unused")
    runs: list[str] = []

    @app.step(preemptible=True)
    async def crunch(n: int) -> int:
        runs.append(f"start {n}")
        if n == 2 and runs.count("start 2") == 1:
            await asyncio.sleep(0.6)  # far longer than its history says
        else:
            await asyncio.sleep(0.01)
        runs.append(f"end {n}")
        return n * 10

    async def item(ctx: TaskContext[Empty], n: int, index: int) -> int:
        return await crunch(n)

    @app.task(state=Empty)
    async def job(ctx: TaskContext[Empty]) -> list[int]:
        if where == "map_async":
            return (await ctx.map_async([1, 2, 3], item)).values()
        return list(await asyncio.gather(crunch(1), crunch(2), crunch(3)))

    record = TaskRecord(task_id="p", task_name="job", state={})
    for _ in range(5):
        observe(record.step_stats.setdefault("crunch", StepStats()), 0.05)
        observe(record.save_stats, 0.01)
    return app.tasks["job"], record, runs


@pytest.mark.parametrize("where", ["map_async", "gather"])
def test_a_preempted_async_step_among_others_reruns_alone_and_whole(where):
    task, record, runs = gathered(where)
    outcome = TurnLoop(
        task, record, budget_of(0.3), lambda: None, Settings(persist_every_s=60)
    ).run()

    assert isinstance(outcome, Suspended), outcome
    assert "preempted step" in outcome.reason
    assert "end 2" not in runs  # cancelled inside its sleep: its partial work discarded
    assert sorted(runs) == ["end 1", "end 3", "start 1", "start 2", "start 3"]
    assert record.counters.preemptions == 1

    # The next invocation has the time: only the preempted call runs again, whole.
    outcome = TurnLoop(
        task, record, budget_of(5.0), lambda: None, Settings(persist_every_s=60)
    ).run()
    assert isinstance(outcome, Returned), outcome
    assert record.result == [10, 20, 30]
    assert runs.count("start 1") == runs.count("start 3") == 1
    assert runs[-2:] == ["start 2", "end 2"]
