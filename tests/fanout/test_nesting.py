"""Fan-out nested in fan-out, and waits and suspensions inside items.

Every step records its run in the test's own ledger (``ran``), so "not rerun on replay" is
the test's count, not the library's. Invocations are cut short by a context that has time
for only a few live steps (``ScriptedContext``), so each task spans several invocations and
replays its finished items.

Every test runs in both flavours (``tests/flavours.py``): the async twin nests
``parallel_async``, ``map_async``, ``child_context_async``, ``invoke_async`` and
``sleep_async`` the same way, its steps' pauses are awaited (asyncio tasks finish out of
order, as threads do), and its step keys are the sync task's.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext, current_context
from tests.conftest import ScriptedContext
from tests.fanout.kit import runtime_on, settle
from tests.flavours import FLAVOURS


class Shape(BaseModel):
    width: int = 3
    jitter: bool = True


class Number(BaseModel):
    n: int


#: tag -> the idempotency key (the journal path) each step ran under, per flavour and seed.
KEYS: dict[tuple[str, int], dict[str, str]] = {}


def nested_app(seed: int = 0, flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()
    jitter = random.Random(seed)
    keys = KEYS.setdefault((flavour, seed), {})

    def note(tag: str) -> float:
        context = current_context()
        with lock:
            ran[tag] += 1
            keys[tag] = context.idempotency_key.replace(context.task_id, "<task>")
            return jitter.uniform(0, 0.01)

    if flavour == "sync":

        @app.step(effect=True)
        def work(tag: str, value: int) -> int:
            time.sleep(note(tag))  # threads finish in a different order on every run
            return value

        @app.task(state=Number)
        def double(ctx: TaskContext[Number]) -> int:
            return work(f"double {ctx.state.n}", ctx.state.n * 2)

        def leaf(tag: str, value: int, ctx: TaskContext[Shape]) -> int:
            return work(tag, value)

        def inner(outer: int, ctx: TaskContext[Shape]) -> list[int]:
            branches = [
                _bind(leaf, f"p{outer}.{i}", outer * 10 + i) for i in range(ctx.state.width)
            ]
            return ctx.parallel(branches, name=f"inner{outer}").values()

        def item(ctx: TaskContext[Shape], value: int, index: int) -> int:
            return work(f"m{index}", value * 100)

        def block(ctx: TaskContext[Shape], base: int) -> dict[str, Any]:
            first = work(f"block {base}", base)
            mapped = ctx.map(range(ctx.state.width), item, max_concurrency=2).values()
            doubled = ctx.invoke("double", Number(n=base))
            return {"first": first, "mapped": mapped, "doubled": doubled}

        @app.task(state=Shape)
        def nested(ctx: TaskContext[Shape]) -> dict[str, Any]:
            outer = ctx.parallel([_bind(inner, o) for o in range(2)], name="outer").values()
            inside = ctx.child_context(block, 7, name="block")
            return {"outer": outer, "block": inside}

    else:

        @app.step(effect=True)
        async def work(tag: str, value: int) -> int:
            await asyncio.sleep(note(tag))  # asyncio tasks finish in a different order
            return value

        @app.task(state=Number)
        async def double(ctx: TaskContext[Number]) -> int:
            return await work(f"double {ctx.state.n}", ctx.state.n * 2)

        async def leaf(tag: str, value: int, ctx: TaskContext[Shape]) -> int:
            return await work(tag, value)

        async def inner(outer: int, ctx: TaskContext[Shape]) -> list[int]:
            branches = [
                _bind(leaf, f"p{outer}.{i}", outer * 10 + i) for i in range(ctx.state.width)
            ]
            return (await ctx.parallel_async(branches, name=f"inner{outer}")).values()

        async def item(ctx: TaskContext[Shape], value: int, index: int) -> int:
            return await work(f"m{index}", value * 100)

        async def block(ctx: TaskContext[Shape], base: int) -> dict[str, Any]:
            first = await work(f"block {base}", base)
            mapped = await ctx.map_async(range(ctx.state.width), item, max_concurrency=2)
            doubled = await ctx.invoke_async("double", Number(n=base))
            return {"first": first, "mapped": mapped.values(), "doubled": doubled}

        @app.task(state=Shape)
        async def nested(ctx: TaskContext[Shape]) -> dict[str, Any]:
            branches = [_bind(inner, o) for o in range(2)]
            outer = (await ctx.parallel_async(branches, name="outer")).values()
            inside = await ctx.child_context_async(block, 7, name="block")
            return {"outer": outer, "block": inside}

    return app, ran


def _bind(fn: Any, *args: Any) -> Any:
    return lambda ctx: fn(*args, ctx)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_parallel_in_parallel_map_and_invoke_in_a_child_context_each_step_once(backend, flavour):
    app, ran = nested_app(flavour=flavour)
    steps = lambda: sum(ran.values())  # noqa: E731
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("nested", Shape())
        settle(runtime, context=lambda: ScriptedContext(2, steps))
        done = runtime.record(task_id)
        children = [runtime.record(c) for b in done.children for c in b.ids()]
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == {
        "outer": [[0, 1, 2], [10, 11, 12]],
        "block": {"first": 7, "mapped": [0, 100, 200], "doubled": 14},
    }
    expected = [f"p{o}.{i}" for o in range(2) for i in range(3)]
    expected += ["block 7", "m0", "m1", "m2", "double 7"]
    assert ran == Counter(dict.fromkeys(expected, 1))  # none rerun on replay
    assert done.counters.invocations > 3  # it did span several invocations
    # The child invoked inside the block: one child, its id derived from the block's place.
    assert [(c.task_name, c.status) for c in children] == [("double", Status.SUCCEEDED)]
    assert "block" in children[0].task_id


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_step_keys_are_the_same_whatever_order_the_threads_finish_in(flavour):
    results = []
    for seed in (1, 2, 3):
        app, ran = nested_app(seed, flavour)
        with runtime_on("memory", app) as runtime, runtime.time.running():
            task_id = app.client().start("nested", Shape(width=4))
            settle(runtime)
            results.append(runtime.record(task_id).result)
        assert len(ran) == 2 * 4 + 1 + 4 + 1  # inner branches, block, map items, child
    assert results[0] == results[1] == results[2]
    keys = [KEYS[flavour, seed] for seed in (1, 2, 3)]
    assert keys[0] == keys[1] == keys[2]
    # Each branch's steps are keyed by its place, not by when its thread ran.
    assert "outer#0/1/inner1#0/3/work#0" in keys[0]["p1.3"]
    assert "block#1/" in keys[0]["m2"]
    assert "/2/work#0" in keys[0]["m2"]


class Waits(BaseModel):
    items: int = 6
    sleep_s: float = 600.0


def waiting_app(flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()

    def note(tag: str) -> float:
        with lock:
            ran[tag] += 1
        return random.uniform(0, 0.01)

    if flavour == "sync":

        @app.step(effect=True)
        def work(tag: str, value: int) -> int:
            time.sleep(note(tag))
            return value

        def item(ctx: TaskContext[Waits], value: int, index: int) -> int:
            before = work(f"before {index}", value)
            if index % 2 == 0:
                ctx.sleep(ctx.state.sleep_s * (1 + index))  # odd items never wait
            return work(f"after {index}", before + 1)

        @app.task(state=Waits)
        def waits(ctx: TaskContext[Waits]) -> list[int]:
            result = ctx.map([i * 10 for i in range(ctx.state.items)], item, max_concurrency=3)
            return [*result.values(), work("end", -1)]

    else:

        @app.step(effect=True)
        async def work(tag: str, value: int) -> int:
            await asyncio.sleep(note(tag))
            return value

        async def item(ctx: TaskContext[Waits], value: int, index: int) -> int:
            before = await work(f"before {index}", value)
            if index % 2 == 0:
                await ctx.sleep_async(ctx.state.sleep_s * (1 + index))  # odd items never wait
            return await work(f"after {index}", before + 1)

        @app.task(state=Waits)
        async def waits(ctx: TaskContext[Waits]) -> list[int]:
            values = [i * 10 for i in range(ctx.state.items)]
            result = await ctx.map_async(values, item, max_concurrency=3)
            return [*result.values(), await work("end", -1)]

    return app, ran


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_sleeps_in_map_items_and_a_short_budget_suspend_the_task_and_no_finished_item_reruns(
    backend, flavour
):
    app, ran = waiting_app(flavour)
    steps = lambda: sum(ran.values())  # noqa: E731
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("waits", Waits())
        started = time.time()
        settle(runtime, context=lambda: ScriptedContext(3, steps))
        slept = time.time() - started
        done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == [1, 11, 21, 31, 41, 51, -1]  # index order
    tags = [f"{when} {i}" for i in range(6) for when in ("before", "after")] + ["end"]
    assert ran == Counter(dict.fromkeys(tags, 1))
    assert done.counters.waits >= 1
    assert done.counters.continuations >= 1
    assert slept >= 600 * 5  # the longest sleep (item 4) was really waited, on the clock
