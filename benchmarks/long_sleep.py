"""A 30-day sleep in virtual time (issue 10): the wall time of the test that does it.

The task of ``wait_cost`` (a step, ``ctx.sleep(30 days)``, a step) runs through
``LocalRuntime(backend="memory", virtual_time=True)``, as ``tests/waits/test_sleep.py`` does:

- ``cap_900s``: SQS's 900 s delay cap, so the sleep is 2,880 timer messages, 2,879 hops;
- ``lifted``: ``max_delay_s`` lifted to the whole sleep, so it is one message and no hop.

Each repeat is a fresh app and runtime in this process (freezegun has already scanned the
loaded modules once: ``warm``), medians over interleaved repeats; ``cold`` is one run in a
fresh interpreter, which pays freezegun's first scan of every loaded module when the virtual
clock starts (as the first virtual-time test of a pytest session does). Target: under 2 s.
With ``--profile`` it prints where a hop's time goes (cProfile, the 900 s-cap case).
"""

from __future__ import annotations

import cProfile
import json
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import emit, median, silence_worker_logs
from benchmarks.wait_cost import nap_app
from continuum.local import LocalRuntime

DAYS = 30
LIFTED_S = 40 * 86_400
ROOT = Path(__file__).resolve().parents[1]


def run_once(days: float, max_delay_s: int) -> tuple[float, float, int]:
    """Wall and CPU seconds of one sleep of ``days`` on a fresh runtime, and its hops."""
    app, _ = nap_app()
    runtime = LocalRuntime(
        app, budget_s=900, backend="memory", virtual_time=True, max_delay_s=max_delay_s
    )
    started, cpu = time.perf_counter(), time.process_time()
    summary = runtime.run("nap", {"days": days})
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert summary.status == "succeeded", summary
    return seconds, cpu, runtime.record(summary.task_id).counters.hops


def cold(days: float, max_delay_s: int) -> dict[str, float]:
    """One run in a fresh interpreter: the run's wall time, and the process's."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.long_sleep", "--one", str(days), str(max_delay_s)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process"] = time.perf_counter() - started
    return out


#: Where a function's own time goes, by the file it is in (first match wins).
CATEGORIES = (
    ("freezegun", ("freezegun",)),  # the patched clock
    ("powertools", ("aws_lambda_powertools",)),  # batch processing, logger, metrics
    ("pydantic_json", ("pydantic", "json")),  # the record's encode and decode
    ("fakes", ("continuum/testing",)),  # the in-memory S3 and SQS
    ("local_runtime", ("continuum/local.py", "continuum/metering.py")),  # event source, counting
    ("continuum", ("continuum/",)),  # the worker, fence, records, waiting
)
OTHER = "stdlib_other"


def category(key: tuple[str, int, str]) -> str | None:
    path, _, name = key
    where = f"{path} {name}"
    for label, needles in CATEGORIES:
        if any(needle in where for needle in needles):
            return label
    return None  # the standard library or a builtin: counted where it was called from


def breakdown(stats: pstats.Stats) -> dict[str, float]:
    """Own time by category; a standard-library function or builtin counts for the category
    of its callers (the one that called it most, by time)."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    for key, (_cc, _nc, tottime, _ct, callers) in raw.items():
        label = category(key)
        if label is None:
            by_caller: dict[str, float] = {}
            for caller, (*_, caller_ct) in callers.items():
                name = category(caller) or OTHER
                by_caller[name] = by_caller.get(name, 0.0) + caller_ct
            label = max(by_caller, key=by_caller.__getitem__, default=OTHER)
        totals[label] = totals.get(label, 0.0) + tottime
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def profile(days: float) -> None:
    """cProfile a 900 s-cap sleep (after a warm-up run, on CPU time: the machine is shared);
    print where a hop's time goes, by category, then the top functions."""
    silence_worker_logs()
    run_once(0.1, 900)
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    _, _, hops = run_once(days, 900)
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(breakdown(stats).values())
    print(f"profile of a {days:g}-day sleep: {hops} hops, {total:.3f} s CPU under cProfile")
    for label, seconds in breakdown(stats).items():
        emit(
            f"long_sleep.profile.{label}", seconds / hops * 1000, f"ms/hop ({seconds / total:.0%})"
        )
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)


def main(quick: bool = False) -> None:
    silence_worker_logs()
    days, repeats = (1, 2) if quick else (DAYS, 5)
    run_once(0.1, 900)  # warm: freezegun's module scan, pydantic's first validations
    cases = {"cap_900s": 900, "lifted": LIFTED_S}
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    hops: dict[str, int] = {}
    for repeat in range(repeats):
        for name in sorted(cases, reverse=repeat % 2 == 1):  # interleaved, alternating
            seconds, used, hops[name] = run_once(days, cases[name])
            wall[name].append(seconds)
            cpu[name].append(used)
    emit("long_sleep.days", days, "days of virtual time (memory backend)")
    for name in cases:
        emit(f"long_sleep.{name}.hops", hops[name], "hops")
        emit(f"long_sleep.{name}.warm", median(wall[name]), "s wall (median; target < 2)")
        emit(f"long_sleep.{name}.warm_cpu", median(cpu[name]), "s CPU (median)")
    per_hop = median(cpu["cap_900s"]) / max(1, hops["cap_900s"]) * 1000
    emit("long_sleep.cap_900s.cpu_per_hop", per_hop, "ms")
    emit("long_sleep.ratio.cap_vs_lifted", median(wall["cap_900s"]) / median(wall["lifted"]), "x")
    # The first run in a fresh interpreter (one case only in --quick: it is the slow part).
    for name in ("lifted",) if quick else tuple(cases):
        got = cold(days, cases[name])
        emit(f"long_sleep.{name}.cold", got["seconds"], "s wall (first run, fresh interpreter)")
        emit(f"long_sleep.{name}.cold_cpu", got["cpu"], "s CPU")
        emit(f"long_sleep.{name}.cold_process", got["process"], "s (the whole process)")


if __name__ == "__main__":
    if "--one" in sys.argv:
        at = sys.argv.index("--one")
        silence_worker_logs()
        seconds, used, hops = run_once(float(sys.argv[at + 1]), int(sys.argv[at + 2]))
        print(json.dumps({"seconds": seconds, "cpu": used, "hops": hops}))
    elif "--profile" in sys.argv:
        at = sys.argv.index("--profile")
        profile(float(sys.argv[at + 1]) if len(sys.argv) > at + 1 else 3.0)
    else:
        main(quick="--quick" in sys.argv)
