"""Step overhead: what a journaled step costs over calling the same function directly.

A task with no AWS calls runs in memory through the real ``TurnLoop`` (a fake persist,
``persist_every_s`` too large to fire, a budget with all the time in the world). Each turn
calls a no-op step ``STEPS_PER_TURN`` times, so the figure includes the per-turn work (state
validation, snapshot) spread over its steps, as an agent's turn would; a second figure with one
long turn isolates the step itself. The direct loop calls the same function the same number
of times. Repeats are interleaved and the medians reported; the overhead per step is
(loop time - direct time) / steps. Target: at most 5 us per step.

With ``--profile`` (or in the full run) it prints the top functions of the step path by
cProfile's own time, to show where the microseconds go.
"""

from __future__ import annotations

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
from continuum._record.model import TaskRecord
from continuum._steps.budget import Budget
from continuum._turn.loop import Returned, TurnLoop

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


def turn_loop(task: Any, record: TaskRecord) -> TurnLoop:
    """The turn loop of one invocation of ``task`` on ``record``, with time to spare and no
    store (``benchmarks.versus`` builds each revision's loop through its own copy of this)."""
    return TurnLoop(task, record, Budget(remaining=lambda: 1e9), lambda: None, math.inf)


def run_task(task: Any, steps: int) -> float:
    """Seconds of one run of the task, which must run ``steps`` steps live."""
    record = TaskRecord(task_id="bench", task_name="spin", state={})
    loop = turn_loop(task, record)
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


def measure(turns: int, per_turn: int, repeats: int) -> tuple[float, float]:
    """Median seconds per step through the loop and directly."""
    task, fn = build(turns, per_turn)
    steps = turns * per_turn
    run_task(task, steps)  # warm up: the step's TypeAdapter and the state model are built lazily
    looped, direct = [], []
    for _ in range(repeats):  # interleaved
        looped.append(run_task(task, steps))
        direct.append(run_direct(fn, turns, per_turn))
    check(min(looped) > 0 and min(direct) > 0, f"no time measured: {looped}, {direct}")
    return median(looped) / steps, median(direct) / steps


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
        looped, direct = measure(t, per_turn, repeats)
        emit(f"step_overhead.{label}.steps_per_s", 1 / looped, "steps/s")
        emit(f"step_overhead.{label}.direct_calls_per_s", 1 / direct, "calls/s")
        emit(f"step_overhead.{label}.ratio", looped / direct, "x direct")
        emit(f"step_overhead.{label}.overhead", 1e6 * (looped - direct), "us/step")
    if not quick or "--profile" in sys.argv:
        profile(turns, STEPS_PER_TURN)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
