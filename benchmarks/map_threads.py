"""``ctx.map`` against a plain thread pool: what running items as journaled child contexts costs.

A task maps ``ITEMS`` items, each one step of ``time.sleep(STEP_S)`` (I/O-bound: the GIL is
free while it sleeps), with ``max_concurrency=CONCURRENCY``, through ``LocalRuntime`` on the
in-memory backend with a 900 s budget (one invocation; no continuation). The same sleeps run in
a plain ``ThreadPoolExecutor(CONCURRENCY)``. Repeats are interleaved; medians are reported and
their ratio. Two figures for continuum: the ``ctx.map`` call itself (timed inside the task), and
the whole task end to end (start, claim, the map, the final save). The ideal is
``ITEMS / CONCURRENCY * STEP_S`` (0.5 s). Target: the map within 1.3x of the thread pool.

With ``--profile`` it prints the top functions of one ``ctx.map`` by cProfile's own time.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from benchmarks import check, emit, median, silence_worker_logs
from continuum import Continuum, TaskContext
from continuum._local.runtime import LocalRuntime

ITEMS = 100
CONCURRENCY = 10
STEP_S = 0.05
REPEATS = 7


class Items(BaseModel):
    n: int


def build(step_s: float) -> tuple[Continuum, list[float]]:
    """An app whose task maps ``n`` sleeping items; the list gets each map's seconds."""
    app = Continuum()
    timings: list[float] = []

    @app.step
    def fetch(i: int) -> int:
        time.sleep(step_s)
        return i

    def item(ctx: TaskContext[Items], i: int, _index: int) -> int:
        return int(ctx.step(fetch, i))

    @app.task(state=Items)
    def mapper(ctx: TaskContext[Items]) -> int:
        started = time.perf_counter()
        values = ctx.map(range(ctx.state.n), item, max_concurrency=CONCURRENCY).values()
        timings.append(time.perf_counter() - started)
        return sum(values)

    return app, timings


def run_continuum(n: int, step_s: float) -> tuple[float, float]:
    """(seconds of the ctx.map call, seconds of the whole task) for one run."""
    app, timings = build(step_s)
    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    started = time.perf_counter()
    summary = runtime.run("mapper", {"n": n})
    total = time.perf_counter() - started
    check(summary.status == "succeeded", f"the map ended {summary.status}: {summary.error}")
    check(summary.result == n * (n - 1) // 2, f"the map summed to {summary.result}")
    check(summary.invocations == 1, f"the map took {summary.invocations} invocations, not 1")
    executed = runtime.record(summary.task_id).counters.steps_executed
    check(executed == n, f"{executed} steps ran live for {n} items")
    # The sleeps ran, at most CONCURRENCY at a time: no less than the ideal.
    check(timings[-1] >= ideal_s(n, step_s), f"{n} items mapped in {timings[-1]:.3f} s")
    return timings[-1], total


def run_pool(n: int, step_s: float) -> float:
    def fetch(i: int) -> int:
        time.sleep(step_s)
        return i

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
        total = sum(pool.map(fetch, range(n)))
    elapsed = time.perf_counter() - started
    check(total == n * (n - 1) // 2, f"the thread pool summed to {total}")
    check(elapsed >= ideal_s(n, step_s), f"the pool ran {n} sleeps in {elapsed:.3f} s")
    return elapsed


def ideal_s(n: int, step_s: float) -> float:
    """The least time ``n`` sleeps of ``step_s`` take, ``CONCURRENCY`` at a time."""
    return -(-n // CONCURRENCY) * step_s


def profile(n: int, step_s: float) -> str:
    """The top functions of one ctx.map, by own time (the threads' sleeps excluded)."""
    app, _ = build(step_s)
    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    profiler = cProfile.Profile()
    profiler.enable()
    runtime.run("mapper", {"n": n})
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
    return out.getvalue()


def main(quick: bool = False, show_profile: bool = False) -> None:
    silence_worker_logs()
    n, repeats = (20, 1) if quick else (ITEMS, REPEATS)
    run_continuum(n, 0.0)  # warm: imports, pydantic schemas
    maps, tasks, pools = [], [], []
    for _ in range(repeats):
        mapped, whole = run_continuum(n, STEP_S)
        maps.append(mapped)
        tasks.append(whole)
        pools.append(run_pool(n, STEP_S))
    ideal = ideal_s(n, STEP_S)
    check(len(maps) == len(pools) == repeats, "the map and the pool measured side by side")
    emit("map_threads.items", n)
    emit("map_threads.max_concurrency", CONCURRENCY)
    emit("map_threads.ideal", ideal, "s")
    emit("map_threads.thread_pool.median", median(pools), "s")
    emit("map_threads.ctx_map.median", median(maps), "s")
    emit("map_threads.task_end_to_end.median", median(tasks), "s")
    emit(
        "map_threads.ratio",
        median(m / p for m, p in zip(maps, pools, strict=True)),
        "x (ctx.map / thread pool; target <= 1.3)",
    )
    emit(
        "map_threads.ratio_end_to_end",
        median(t / p for t, p in zip(tasks, pools, strict=True)),
        "x (whole task / thread pool)",
    )
    emit(
        "map_threads.overhead_per_item",
        (median(maps) - median(pools)) / n * 1e3,
        "ms (ctx.map - thread pool, per item)",
    )
    if show_profile:
        print(profile(n, STEP_S), file=sys.stderr)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv, show_profile="--profile" in sys.argv)
