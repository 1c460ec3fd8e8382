"""Run every benchmark: ``python -m benchmarks.run [--quick] [NAME ...]`` (``make bench``).

``--quick`` runs tiny versions (seconds, for a smoke test); names pick a subset. Each
benchmark prints ``name: value unit`` lines; this adds how long each took and how many of its
own checks passed. A benchmark that fails a check (``benchmarks.Mismeasured``) or makes none,
and one that cannot run (its import fails, it crashes), is reported by name on stderr, the
others still run, and the run exits with status 1 at the end.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

from benchmarks import Mismeasured, checks_made, emit

BENCHMARKS = (
    "budget_fill",
    "budget_fill_knobs",
    "step_overhead",
    "tracing_overhead",
    "aws_calls_per_continuation",
    "local_e2e",
    "cold_import",
    "cli_start",
    "checkpoint",
    "wait_cost",
    "wake_latency",
    "long_sleep",
    "agent_overhead",
    "agent_async",
    "task_cost",
    "map_threads",
    "fanout_tasks",
)
#: The package's other modules, and why this does not run them.
NOT_RUN = {
    "run": "this runner",
    "fanout_worker": "a worker process that fanout_tasks starts",
    "versus": "compares git revisions (python -m benchmarks.versus REV ...), smoke-tested apart",
    "trace_waterfall": "draws docs/tracing.md's picture of one task's trace, tested apart",
}


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    chosen = [name for name in argv if not name.startswith("-")] or list(BENCHMARKS)
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    failed, crashed = [], []
    for name in chosen:
        started, before = time.perf_counter(), checks_made()
        try:
            importlib.import_module(f"benchmarks.{name}").main(quick=quick)
        except Mismeasured as exc:
            print(f"benchmark {name} {exc}", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        except Exception as exc:  # one that cannot run must not hide the others' figures
            traceback.print_exc(file=sys.stderr)
            print(f"benchmark {name} could not run: {exc!r}", file=sys.stderr, flush=True)
            crashed.append(name)
            continue
        checks = checks_made() - before
        emit(f"run.{name}.seconds", time.perf_counter() - started, "s")
        emit(f"run.{name}.checks", checks, "self-checks passed")
        if checks == 0:
            print(f"benchmark {name} checked nothing of what it measured", file=sys.stderr)
            failed.append(name)
    if crashed:
        print(f"benchmarks that could not run: {', '.join(crashed)}", file=sys.stderr)
    if failed:
        print(f"benchmarks that failed their checks: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed or crashed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
