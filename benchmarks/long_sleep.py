"""A 30-day sleep in virtual time: the wall time of the test that does it.

The task of ``wait_cost`` (a step, ``ctx.sleep(30 days)``, a step) runs through
``LocalRuntime(backend="memory", virtual_time=True)``, as ``tests/waits/test_sleep.py`` does:

- ``cap_900s``: SQS's 900 s delay cap, so the sleep is 2,880 timer messages, 2,879 hops;
- ``lifted``: ``max_delay_s`` lifted to the whole sleep, so it is one message and no hop;
- ``scheduler``: the 900 s cap with a scheduler (``LocalRuntime(scheduler=True)``, the in-memory
  one fired on the virtual clock), so the sleep is one schedule, one hop on its fire and one
  delayed message. Target: under 0.5 s.

Each repeat is a fresh app and runtime in this process (freezegun has already scanned the
loaded modules once: ``warm``), medians over interleaved repeats; ``cold`` is one run in a
fresh interpreter, which pays freezegun's first scan of every loaded module when the virtual
clock starts (as the first virtual-time test of a pytest session does). Target: under 2 s.
``python -m benchmarks.long_sleep --profile [DAYS]`` prints where a hop's time goes, by
category (py-spy if installed, else cProfile), in the 900 s-cap case.
"""

from __future__ import annotations

import cProfile
import json
import math
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import check, emit, median, silence_worker_logs
from benchmarks.wait_cost import nap_app
from continuum._local.runtime import LocalRuntime

DAYS = 30
LIFTED_S = 40 * 86_400
ROOT = Path(__file__).resolve().parents[1]


#: ``max_delay_s`` of the scheduler case: SQS's cap, with a scheduler.
SCHEDULED = -900


def run_once(days: float, max_delay_s: int) -> tuple[float, float, int, int]:
    """Wall and CPU seconds of one sleep of ``days`` on a fresh runtime, its hops, and the
    modules first imported during it (what only the first run in an interpreter loads).
    ``max_delay_s`` SCHEDULED: the 900 s cap with a scheduler."""
    app, _ = nap_app()
    scheduler = max_delay_s == SCHEDULED
    max_delay_s = abs(max_delay_s)
    runtime = LocalRuntime(
        app,
        budget_s=900,
        backend="memory",
        virtual_time=True,
        max_delay_s=max_delay_s,
        scheduler=scheduler,
    )
    modules = len(sys.modules)
    started, cpu = time.perf_counter(), time.process_time()
    summary = runtime.run("nap", {"days": days})
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    check(summary.status == "succeeded", f"the sleep ended {summary.status}: {summary.error}")
    record = runtime.record(summary.task_id)
    timers = math.ceil(days * 86_400 / max_delay_s)  # the last one wakes the task
    if scheduler:
        timers = 2 if days * 86_400 > max_delay_s else 1  # the fire, then the delayed timer
    check(
        record.counters.hops == timers - 1,
        f"a {days:g}-day sleep with a {max_delay_s} s delay cap made {record.counters.hops} "
        f"hops, not {timers - 1}",
    )
    return seconds, cpu, record.counters.hops, len(sys.modules) - modules


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
    check(
        out["imported"] > 0,
        "the cold run imported no module: it was not the first run in its interpreter",
    )
    return out


#: Where a function's own time goes, by the file it is in (first match wins).
CATEGORIES = (
    ("freezegun", ("freezegun",)),  # the patched clock
    ("powertools", ("aws_lambda_powertools",)),  # batch processing, logger, metrics
    ("pydantic_json", ("pydantic", "json")),  # the record's encode and decode
    ("fakes", ("continuum/testing",)),  # the in-memory S3 and SQS
    # the event source, and the counting of calls
    ("local_runtime", ("continuum/_local/runtime.py", "continuum/_worker/metering.py")),
    ("continuum", ("continuum/",)),  # the worker, fence, records, waiting
)
OTHER = "stdlib_other"


def category(frame: str) -> str | None:
    """The category of a frame ("name (path:line)"); None for the standard library or a
    builtin, which counts for the code that called it."""
    for label, needles in CATEGORIES:
        if any(needle in frame for needle in needles):
            return label
    return None


def spy_breakdown(raw: str) -> tuple[dict[str, int], int]:
    """Samples by category in py-spy's raw output (``stack count`` lines): each sample counts
    for its innermost frame that has a category. Only samples inside ``run_once``."""
    samples: dict[str, int] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if "run_once (" not in stack:
            continue
        frames = stack.split(";")
        label = next((c for f in reversed(frames) if (c := category(f)) is not None), OTHER)
        samples[label] = samples.get(label, 0) + int(count)
    return dict(sorted(samples.items(), key=lambda item: -item[1])), sum(samples.values())


def cprofile_breakdown(stats: pstats.Stats) -> dict[str, float]:
    """Own time by category; a standard-library function or builtin counts for the category
    of the callers that spent the most time in it."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    for (path, line, name), (_cc, _nc, tottime, _ct, callers) in raw.items():
        label = category(f"{name} ({path}:{line})")
        if label is None:
            by_caller: dict[str, float] = {}
            for (c_path, c_line, c_name), (*_, caller_ct) in callers.items():
                c_label = category(f"{c_name} ({c_path}:{c_line})") or OTHER
                by_caller[c_label] = by_caller.get(c_label, 0.0) + caller_ct
            label = max(by_caller, key=by_caller.__getitem__, default=OTHER)
        totals[label] = totals.get(label, 0.0) + tottime
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def profile(days: float) -> None:
    """Where a hop's time goes, by category, in a warm ``days``-day sleep with the 900 s cap.

    With py-spy installed (``pip install py-spy``): sampled at 1 kHz in a child process, no
    overhead per call. Without it: cProfile on CPU time, which inflates code that makes many
    small calls (freezegun's clock most of all)."""
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if spy is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "spy.txt"
            child = [sys.executable, "-m", "benchmarks.long_sleep", "--one", str(days), "900"]
            done = subprocess.run(
                [spy, "record", "-r", "1000", "-f", "raw", "-o", str(out), "--", *child, "--warm"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            )
            ours = [line for line in done.stdout.splitlines() if line.startswith("{")]
            got = json.loads(ours[-1])  # py-spy prints its own lines too
            samples, total = spy_breakdown(out.read_text())
        print(f"py-spy, a {days:g}-day sleep: {got['hops']} hops, {total} samples at 1 kHz")
        for label, n in samples.items():
            ms = n / 1000 / got["hops"] * 1000
            emit(f"long_sleep.profile.{label}", ms, f"ms/hop ({n / total:.0%})")
        return
    silence_worker_logs()
    run_once(0.1, 900)
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    _, _, hops, _ = run_once(days, 900)
    profiler.disable()
    stats = pstats.Stats(profiler)
    by_category = cprofile_breakdown(stats)
    total = sum(by_category.values())
    print(f"cProfile (CPU time), a {days:g}-day sleep: {hops} hops, {total:.3f} s")
    for label, seconds in by_category.items():
        ms = seconds / hops * 1000
        emit(f"long_sleep.profile.{label}", ms, f"ms/hop ({seconds / total:.0%})")
    stats.sort_stats("cumulative").print_stats(40)


def main(quick: bool = False) -> None:
    silence_worker_logs()
    days, repeats = (1, 2) if quick else (DAYS, 5)
    run_once(0.1, 900)  # warm: freezegun's module scan, pydantic's first validations
    run_once(0.1, SCHEDULED)  # and the scheduler's modules
    cases = {"cap_900s": 900, "lifted": LIFTED_S, "scheduler": SCHEDULED}
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    hops: dict[str, int] = {}
    for repeat in range(repeats):
        for name in sorted(cases, reverse=repeat % 2 == 1):  # interleaved, alternating
            seconds, used, hops[name], imported = run_once(days, cases[name])
            check(imported == 0, f"a warm run of {name} imported {imported} modules: not warm")
            wall[name].append(seconds)
            cpu[name].append(used)
    emit("long_sleep.days", days, "days of virtual time (memory backend)")
    for name in cases:
        emit(f"long_sleep.{name}.hops", hops[name], "hops")
        target = "0.5" if name == "scheduler" else "2"
        emit(f"long_sleep.{name}.warm", median(wall[name]), f"s wall (median; target < {target})")
        emit(f"long_sleep.{name}.warm_cpu", median(cpu[name]), "s CPU (median)")
    per_hop = median(cpu["cap_900s"]) / max(1, hops["cap_900s"]) * 1000
    emit("long_sleep.cap_900s.cpu_per_hop", per_hop, "ms")
    emit("long_sleep.ratio.cap_vs_lifted", median(wall["cap_900s"]) / median(wall["lifted"]), "x")
    # The first run in a fresh interpreter (one case only in --quick: it is the slow part).
    for name in ("lifted",) if quick else tuple(cases):
        got = cold(days, cases[name])
        check(got["hops"] == hops[name], f"the cold {name} run made {got['hops']} hops")
        emit(f"long_sleep.{name}.cold", got["seconds"], "s wall (first run, fresh interpreter)")
        emit(f"long_sleep.{name}.cold_cpu", got["cpu"], "s CPU")
        emit(f"long_sleep.{name}.cold_process", got["process"], "s (the whole process)")


if __name__ == "__main__":
    if "--one" in sys.argv:
        at = sys.argv.index("--one")
        silence_worker_logs()
        if "--warm" in sys.argv:
            run_once(0.1, 900)
        seconds, used, hops, imported = run_once(float(sys.argv[at + 1]), int(sys.argv[at + 2]))
        print(json.dumps({"seconds": seconds, "cpu": used, "hops": hops, "imported": imported}))
    elif "--profile" in sys.argv:
        at = sys.argv.index("--profile")
        profile(float(sys.argv[at + 1]) if len(sys.argv) > at + 1 else 3.0)
    else:
        main(quick="--quick" in sys.argv)
