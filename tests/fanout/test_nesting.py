"""Fan-out nested in fan-out, and waits and suspensions inside items.

Every step records its run in the test's own ledger (``ran``), so "not rerun on replay" is
the test's count, not the library's. Invocations are cut short by a context that has time
for only a few live steps (``ScriptedContext``), so each task spans several invocations and
replays its finished items.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext, current_context
from tests.conftest import ScriptedContext
from tests.fanout.kit import runtime_on, settle


class Shape(BaseModel):
    width: int = 3
    jitter: bool = True


class Number(BaseModel):
    n: int


#: tag -> the idempotency key (the journal path) each step ran under, per seed.
KEYS: dict[int, dict[str, str]] = {}


def nested_app(seed: int = 0) -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()
    jitter = random.Random(seed)
    keys = KEYS.setdefault(seed, {})

    @app.step(effect=True)
    def work(tag: str, value: int) -> int:
        context = current_context()
        with lock:
            ran[tag] += 1
            keys[tag] = context.idempotency_key.replace(context.task_id, "<task>")
            pause = jitter.uniform(0, 0.01)
        time.sleep(pause)  # threads finish in a different order on every run
        return value

    @app.task(state=Number)
    def double(ctx: TaskContext[Number]) -> int:
        return work(f"double {ctx.state.n}", ctx.state.n * 2)

    def leaf(tag: str, value: int, ctx: TaskContext[Shape]) -> int:
        return work(tag, value)

    def inner(outer: int, ctx: TaskContext[Shape]) -> list[int]:
        branches = [_bind(leaf, f"p{outer}.{i}", outer * 10 + i) for i in range(ctx.state.width)]
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

    return app, ran


def _bind(fn: Any, *args: Any) -> Any:
    return lambda ctx: fn(*args, ctx)


def test_parallel_in_parallel_map_and_invoke_in_a_child_context_each_step_once(backend):
    app, ran = nested_app()
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


def test_step_keys_are_the_same_whatever_order_the_threads_finish_in():
    results = []
    for seed in (1, 2, 3):
        app, ran = nested_app(seed)
        with runtime_on("memory", app) as runtime, runtime.time.running():
            task_id = app.client().start("nested", Shape(width=4))
            settle(runtime)
            results.append(runtime.record(task_id).result)
        assert len(ran) == 2 * 4 + 1 + 4 + 1  # inner branches, block, map items, child
    assert results[0] == results[1] == results[2]
    assert KEYS[1] == KEYS[2] == KEYS[3]
    # Each branch's steps are keyed by its place, not by when its thread ran.
    assert "outer#0/1/inner1#0/3/work#0" in KEYS[1]["p1.3"]
    assert "block#1/" in KEYS[1]["m2"]
    assert "/2/work#0" in KEYS[1]["m2"]


class Waits(BaseModel):
    items: int = 6
    sleep_s: float = 600.0


def waiting_app() -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()

    @app.step(effect=True)
    def work(tag: str, value: int) -> int:
        with lock:
            ran[tag] += 1
        time.sleep(random.uniform(0, 0.01))
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

    return app, ran


def test_sleeps_in_map_items_and_a_short_budget_suspend_the_task_and_no_finished_item_reruns(
    backend,
):
    app, ran = waiting_app()
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
