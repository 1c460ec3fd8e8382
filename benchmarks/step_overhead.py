"""Step overhead: what a journaled step costs over calling the same function directly.

A task with no AWS calls runs in memory through the real ``TurnLoop`` (a fake persist,
``persist_every_s`` too large to fire, a budget with all the time in the world). Each turn
calls a no-op step ``STEPS_PER_TURN`` times, so the figure includes the per-turn work (state
validation, snapshot) spread over its steps, as an agent's turn would; a second figure with one
long turn isolates the step itself. The direct loop calls the same function the same number
of times. Repeats are interleaved and the medians reported; the overhead per step is
(loop time - direct time) / steps. Target: at most 5 us per step.

An async task awaiting an ``async def`` no-op step is measured the same way, interleaved with
the sync one in one run: its direct loop awaits the same coroutine function in one coroutine
on an event loop, so what is left is what the journal adds to an awaited step. Target: an async
step costs at most 2x a sync one (``step_overhead.async.vs_sync``).

With ``--profile`` (or in the full run) it prints the top functions of the step path by
cProfile's own time, to show where the microseconds go.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import math
import pstats
import sys
import time
from typing import Any

from pydantic import BaseModel

from benchmarks import check, emit, median
from continuum import Continuum, TaskContext
from continuum._define.settings import Settings
from continuum._record.model import TaskRecord
from continuum._steps.budget import Budget
from continuum._turn.loop import Returned, TurnLoop
from continuum._turn.loop_slot import invocation_loop

STEPS_PER_TURN = 100


class Counter(BaseModel):
    n: int = 0


def build(turns: int, per_turn: int) -> tuple[Any, Any]:
    """A task of ``turns`` turns of ``per_turn`` no-op steps, and the step's plain function."""
    app = Continuum(bucket="unused", queue_url="unused")

    @app.step
    def noop(i: int) -> int:
        return i

    @app.task(state=Counter)
    def spin(ctx: TaskContext[Counter]) -> int | None:
        for i in range(per_turn):
            noop(i)
        ctx.state.n += 1
        return ctx.state.n if ctx.state.n >= turns else None

    return app.tasks["spin"], noop.fn


def build_async(turns: int, per_turn: int) -> tuple[Any, Any]:
    """The async twin of ``build``: an async task awaiting an ``async def`` no-op step."""
    app = Continuum(bucket="unused", queue_url="unused")

    @app.step
    async def noop(i: int) -> int:
        return i

    @app.task(state=Counter)
    async def spin(ctx: TaskContext[Counter]) -> int | None:
        for i in range(per_turn):
            await noop(i)
        ctx.state.n += 1
        return ctx.state.n if ctx.state.n >= turns else None

    return app.tasks["spin"], noop.fn


def turn_loop(task: Any, record: TaskRecord) -> TurnLoop:
    """The turn loop of one invocation of ``task`` on ``record``, with time to spare and no
    store (``benchmarks.versus`` builds each revision's loop through its own copy of this)."""
    return TurnLoop(
        task,
        record,
        Budget(remaining=lambda: 1e9),
        lambda: None,
        Settings(persist_every_s=math.inf),
    )


def run_task(task: Any, steps: int) -> float:
    """Seconds of one run of the task, which must run ``steps`` steps live."""
    record = TaskRecord(task_id="bench", task_name="spin", state={})
    loop = turn_loop(task, record)
    with invocation_loop():  # as the worker runs it: an async task's turns share one loop
        started = time.perf_counter()
        outcome = loop.run()
        elapsed = time.perf_counter() - started
    check(isinstance(outcome, Returned), f"the task ended {outcome!r}")
    counters = record.counters
    check(
        (counters.steps_executed, counters.steps_replayed) == (steps, 0),
        f"{counters.steps_executed} steps ran live and {counters.steps_replayed} replayed; "
        f"{steps} were to run live",
    )
    timed = record.step_stats["noop"].count if "noop" in record.step_stats else 0
    check(timed == steps, f"{timed} runs of the step were timed, of {steps}")
    return elapsed


def run_direct(fn: Any, turns: int, per_turn: int) -> float:
    started = time.perf_counter()
    total = 0
    for _ in range(turns):
        for i in range(per_turn):
            total += fn(i)
    elapsed = time.perf_counter() - started
    check(total == turns * per_turn * (per_turn - 1) // 2, f"the direct calls returned {total}")
    return elapsed


def run_direct_async(fn: Any, turns: int, per_turn: int) -> float:
    """Seconds of awaiting ``fn`` as often as the task does, in one coroutine on a fresh loop
    (the loop's making is left out, as the task's is)."""

    async def calls() -> float:
        started = time.perf_counter()
        total = 0
        for _ in range(turns):
            for i in range(per_turn):
                total += await fn(i)
        elapsed = time.perf_counter() - started
        check(total == turns * per_turn * (per_turn - 1) // 2, f"the direct awaits gave {total}")
        return elapsed

    return asyncio.run(calls())


def measure(turns: int, per_turn: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Median seconds per step through the loop and directly, for the sync task and the async
    one, their repeats interleaved."""
    ways = {
        "sync": (build(turns, per_turn), run_direct),
        "async": (build_async(turns, per_turn), run_direct_async),
    }
    steps = turns * per_turn
    for (task, _), _ in ways.values():
        run_task(task, steps)  # warm up: the step's TypeAdapter and the state model are lazy
    looped: dict[str, list[float]] = {name: [] for name in ways}
    direct: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, ((task, fn), direct_run) in ways.items():
            looped[name].append(run_task(task, steps))
            direct[name].append(direct_run(fn, turns, per_turn))
    for name in ways:
        check(
            min(looped[name]) > 0 and min(direct[name]) > 0,
            f"no time measured ({name}): {looped[name]}, {direct[name]}",
        )
    return {name: (median(looped[name]) / steps, median(direct[name]) / steps) for name in ways}


def profile(turns: int, per_turn: int, top: int = 15) -> None:
    task, _ = build(turns, per_turn)
    steps = turns * per_turn
    run_task(task, steps)
    profiler = cProfile.Profile()
    profiler.enable()
    run_task(task, steps)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]  # type: ignore[attr-defined]
    for (filename, line, name), (_cc, ncalls, tottime, _cum, _callers) in rows:
        parts = filename.rsplit("/", 2)
        where = name if filename == "~" else f"{'/'.join(parts[-2:])}:{line}({name})"
        emit(
            f"step_overhead.profile.{where}",
            f"{1e6 * tottime / steps:.2f}",
            f"us/step own time ({ncalls / steps:g} calls/step)",
        )


def main(quick: bool = False) -> None:
    turns, repeats = (20, 3) if quick else (200, 9)
    for label, t, per_turn in (
        (f"{STEPS_PER_TURN}_steps_per_turn", turns, STEPS_PER_TURN),
        ("one_long_turn", 1, turns * STEPS_PER_TURN),
    ):
        measured = measure(t, per_turn, repeats)
        looped, direct = measured["sync"]
        emit(f"step_overhead.{label}.steps_per_s", 1 / looped, "steps/s")
        emit(f"step_overhead.{label}.direct_calls_per_s", 1 / direct, "calls/s")
        emit(f"step_overhead.{label}.ratio", looped / direct, "x direct")
        emit(f"step_overhead.{label}.overhead", 1e6 * (looped - direct), "us/step")
        async_looped, async_direct = measured["async"]
        sync_cost, async_cost = looped - direct, async_looped - async_direct
        check(sync_cost > 0 and async_cost > 0, f"no overhead measured: {measured}")
        emit(f"step_overhead.async.{label}.overhead", 1e6 * async_cost, "us/step")
        emit(f"step_overhead.async.{label}.vs_sync", async_cost / sync_cost, "x a sync step")
    if not quick or "--profile" in sys.argv:
        profile(turns, STEPS_PER_TURN)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
