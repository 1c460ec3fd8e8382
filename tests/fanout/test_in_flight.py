"""Items of a batch that are running when something happens to the batch: a worker killed
inside an item's step or at a save of the journal while other items run, an item that fails
while others run (fail-fast), and a cancel that reaches items in the middle of their steps.

Every test runs in both flavours (``tests/flavours.py``): ``ctx.map`` items in threads, and
``map_async`` items as asyncio tasks on the invocation's loop. Steps count their own runs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import BatchResult, Completion, Continuum, Status, TaskCancelledError, TaskContext
from continuum._record.model import walk
from tests.fanout.kit import Trap, WorkerDied, runtime_on, settle
from tests.flavours import FLAVOURS

N = 4


class Batch(BaseModel):
    n: int = N


def report(batch: BatchResult) -> dict[str, Any]:
    return {
        "started": [item.index for item in batch.items],
        "failed": [item.index for item in batch.failed()],
        "values": [item.result for item in batch.succeeded()],
        "status": batch.status,
        "reason": batch.completion_reason,
    }


# -- a worker killed inside an item's step ----------------------------------------------------


def dying_app(flavour: str) -> tuple[Continuum, Counter[str]]:
    """Items one at a time, each one effect step (saved as soon as it ran); the first run of
    item 2's step kills its worker."""
    app = Continuum(max_step_crashes=3)
    ran: Counter[str] = Counter()

    def run(i: int) -> int:
        ran[f"item {i}"] += 1
        if i == 2 and ran[f"item {i}"] == 1:
            raise WorkerDied(f"killed inside item {i}'s step")
        return i * 10

    if flavour == "sync":

        @app.step(effect=True)
        def work(i: int) -> int:
            return run(i)

        def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
            return work(i)

        @app.task(state=Batch)
        def fan(ctx: TaskContext[Batch]) -> dict[str, Any]:
            return report(ctx.map(range(ctx.state.n), item, max_concurrency=1))

    else:

        @app.step(effect=True)
        async def work(i: int) -> int:
            return run(i)

        async def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
            return await work(i)

        @app.task(state=Batch)
        async def fan(ctx: TaskContext[Batch]) -> dict[str, Any]:
            return report(await ctx.map_async(range(ctx.state.n), item, max_concurrency=1))

    return app, ran


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_worker_killed_inside_an_items_step_reruns_only_that_step(backend, flavour):
    app, ran = dying_app(flavour)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("fan", Batch())
        deaths = settle(runtime)
        done = runtime.record(task_id)
    assert deaths == 1
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result["values"] == [0, 10, 20, 30]
    # The items recorded before the death ran once; the one it killed ran again.
    assert ran == Counter({"item 0": 1, "item 1": 1, "item 2": 2, "item 3": 1})
    assert done.counters.recoveries == 1


# -- a worker killed at a save while items run ------------------------------------------------


def saving_app(flavour: str) -> tuple[Continuum, Counter[int]]:
    """Two items at a time, each two effect steps (the journal is saved after each); the odd
    ones take a little longer, so saves land while other items' steps run."""
    app = Continuum()
    ran: Counter[int] = Counter()
    lock = threading.Lock()

    def begin(i: int) -> float:
        with lock:
            ran[i] += 1
        return 0.01 * (i % 2)

    if flavour == "sync":

        @app.step(effect=True)
        def work(i: int) -> int:
            time.sleep(begin(i))
            return i * 10

        def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
            return work(i) + work(i + 100)

        @app.task(state=Batch)
        def fan(ctx: TaskContext[Batch]) -> list[int]:
            return ctx.map(range(ctx.state.n), item, max_concurrency=2).values()

    else:

        @app.step(effect=True)
        async def work(i: int) -> int:
            await asyncio.sleep(begin(i))
            return i * 10

        async def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
            return await work(i) + await work(i + 100)

        @app.task(state=Batch)
        async def fan(ctx: TaskContext[Batch]) -> list[int]:
            return (await ctx.map_async(range(ctx.state.n), item, max_concurrency=2)).values()

    return app, ran


def journal_save(key: str, body: dict[str, Any]) -> bool:
    return key.endswith("/record.json") and body.get("status") == "running"


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("nth", [2, 4, 6])
def test_a_worker_killed_after_a_save_among_running_items_reruns_no_step_it_saved(flavour, nth):
    trap = Trap("put", journal_save, after=True, nth=nth)
    app, ran = saving_app(flavour)
    saved: set[int] = set()
    with runtime_on("memory", app) as runtime, runtime.time.running():
        trap.arm(app)
        task_id = app.client().start("fan", Batch())

        def note_what_was_saved() -> None:
            record = runtime.record(task_id)
            steps = [e for e in walk(record.journal) if e.kind == "step" and not e.partial]
            saved.update(entry.result // 10 for entry in steps)

        deaths = settle(runtime, on_death=note_what_was_saved)
        done = runtime.record(task_id)
    assert (trap.sprung, deaths) == (True, 1)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == [1000 + 20 * i for i in range(N)]
    assert saved, "the kill came after a save of some step"
    # What the save that landed held never ran again; a step running at the kill may have.
    assert {i: ran[i] for i in saved} == dict.fromkeys(saved, 1)
    assert sum(ran.values()) <= 2 * N + 1


# -- fail-fast with items in flight -----------------------------------------------------------


def failing_app(flavour: str) -> tuple[Continuum, Counter[int]]:
    """Three items at a time; item 1 fails at once while items 0 and 2 are still working."""
    app = Continuum()
    ran: Counter[int] = Counter()
    lock = threading.Lock()
    fail_fast = Completion(tolerated_failure_count=0)

    def begin(i: int) -> float:
        with lock:
            ran[i] += 1
        if i == 1:
            raise ValueError("item 1 failed")
        return 0.05

    if flavour == "sync":

        @app.step
        def work(i: int) -> int:
            time.sleep(begin(i))
            return i * 10

        def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
            return work(i)

        @app.task(state=Batch)
        def fan(ctx: TaskContext[Batch]) -> dict[str, Any]:
            items = range(ctx.state.n * 2)
            return report(ctx.map(items, item, max_concurrency=3, completion=fail_fast))

    else:

        @app.step
        async def work(i: int) -> int:
            await asyncio.sleep(begin(i))
            return i * 10

        async def item(ctx: TaskContext[Batch], i: int, index: int) -> int:
            return await work(i)

        @app.task(state=Batch)
        async def fan(ctx: TaskContext[Batch]) -> dict[str, Any]:
            items = range(ctx.state.n * 2)
            batch = await ctx.map_async(items, item, max_concurrency=3, completion=fail_fast)
            return report(batch)

    return app, ran


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_fail_fast_starts_no_item_after_a_failure_and_keeps_those_in_flight(flavour):
    app, ran = failing_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        task_id = app.client().start("fan", Batch())
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == {
        "started": [0, 1, 2],
        "failed": [1],
        "values": [0, 20],  # the items in flight when item 1 failed ran to their end
        "status": "failed",
        "reason": "failure_tolerance_exceeded",
    }
    assert ran == Counter({0: 1, 1: 1, 2: 1})


# -- a cancel that reaches items in the middle of their steps ---------------------------------


def cancelled_app(flavour: str) -> tuple[Continuum, Counter[str], dict[str, str]]:
    """Two items at a time, each two steps; the first step of item 1 cancels the task, so the
    items see TaskCancelledError at their next step (the inbox is read before every step),
    and the task cleans up with one step."""
    app = Continuum(inbox_poll_s=0.001)
    ran: Counter[str] = Counter()
    lock = threading.Lock()
    box: dict[str, str] = {}

    def note(tag: str) -> str:
        with lock:
            ran[tag] += 1
        if tag == "first 1":
            app.client().cancel(box["task_id"], "not needed")
        return tag

    if flavour == "sync":

        @app.step
        def step(tag: str) -> str:
            return note(tag)

        def item(ctx: TaskContext[Batch], i: int, index: int) -> str:
            step(f"first {i}")
            time.sleep(0.05)  # the cancel lands while the item is between its steps
            return step(f"second {i}")

        @app.task(state=Batch)
        def fan(ctx: TaskContext[Batch]) -> Any:
            try:
                return ctx.map(range(ctx.state.n), item, max_concurrency=2).values()
            except TaskCancelledError:
                step("cleanup")
                raise

    else:

        @app.step
        async def step(tag: str) -> str:
            return note(tag)

        async def item(ctx: TaskContext[Batch], i: int, index: int) -> str:
            await step(f"first {i}")
            await asyncio.sleep(0.05)  # the cancel lands while the item is between its steps
            return await step(f"second {i}")

        @app.task(state=Batch)
        async def fan(ctx: TaskContext[Batch]) -> Any:
            try:
                return (await ctx.map_async(range(ctx.state.n), item, max_concurrency=2)).values()
            except TaskCancelledError:
                await step("cleanup")
                raise

    return app, ran, box


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_cancel_reaches_running_items_at_their_next_step_and_starts_no_more(flavour):
    app, ran, box = cancelled_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        box["task_id"] = task_id = app.client().start("fan", Batch())
        settle(runtime)
        done = runtime.record(task_id)
    assert done.status == Status.CANCELLED, done.error
    assert ran["cleanup"] == 1
    # Items 0 and 1 had started; neither took a second step, and no other item started.
    assert {tag for tag in ran if tag != "cleanup"} == {"first 0", "first 1"}
    assert set(ran.values()) == {1}
