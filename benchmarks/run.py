"""Run every benchmark: ``python -m benchmarks.run [--quick] [NAME ...]`` (``make bench``).

``--quick`` runs tiny versions (seconds, for a smoke test); names pick a subset. Each
benchmark prints ``name: value unit`` lines; this adds how long each took.
"""

from __future__ import annotations

import importlib
import sys
import time

from benchmarks import emit

BENCHMARKS = (
    "budget_fill",
    "budget_fill_knobs",
    "step_overhead",
    "aws_calls_per_continuation",
    "local_e2e",
    "cold_import",
    "checkpoint",
    "wait_cost",
    "wake_latency",
    "long_sleep",
    "agent_overhead",
    "task_cost",
    "map_threads",
    "fanout_tasks",
)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    chosen = [name for name in argv if not name.startswith("-")] or list(BENCHMARKS)
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    for name in chosen:
        started = time.perf_counter()
        importlib.import_module(f"benchmarks.{name}").main(quick=quick)
        emit(f"run.{name}.seconds", time.perf_counter() - started, "s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
