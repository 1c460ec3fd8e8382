"""continuum's benchmarks: ``make bench`` runs them all through ``benchmarks.run``.

Each module has ``main(quick: bool)`` and prints ``name: value unit`` lines. Wall-clock figures
come from a shared, noisy 2-core machine: compare the ratios measured side by side in one run
(medians over interleaved repeats), never a time against a fixed threshold in a test.

Each benchmark also checks that it measured what it names (:func:`check`): the work it times
was done, the clock it reads reached the code it measures, its counts add up. A failed check
ends the benchmark with :class:`Mismeasured` (exit status 1 and the reason), never a figure.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterable
from typing import Any

# boto3 must never reach a real account from a benchmark.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"


class Mismeasured(SystemExit):
    """A benchmark did not measure what it names. A ``SystemExit``: run alone, the benchmark
    ends with status 1 and this message; ``benchmarks.run`` reports it and fails the run."""


#: Checks made in this process, passed or not (``benchmarks.run`` reports them per benchmark).
_CHECKS = [0]


def check(ok: bool, what: str) -> None:
    """End the benchmark with ``what`` (what it found instead) unless ``ok``. Not ``assert``:
    ``python -O`` would drop it."""
    _CHECKS[0] += 1
    if not ok:
        raise Mismeasured(f"did not measure what it names: {what}")


def checks_made() -> int:
    return _CHECKS[0]


def emit(name: str, value: Any, unit: str = "") -> None:
    """Print one ``name: value unit`` line (floats to 4 significant digits)."""
    if isinstance(value, float):
        value = f"{value:.4g}"
    print(f"{name}: {value} {unit}".rstrip(), flush=True)


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


class ScriptedContext:
    """A Lambda context with ``budget_s`` left until ``allowed`` more live steps have run,
    then none: each emulated invocation runs exactly that many steps and suspends, without
    waiting for a real deadline (the same device as ``tests/conftest.py``)."""

    def __init__(self, allowed: int, executed: Callable[[], int], budget_s: float = 900) -> None:
        self.allowed = allowed
        self.executed = executed
        self.start = executed()
        self.budget_ms = int(budget_s * 1000)
        self.aws_request_id = "bench"
        self.function_name = "bench"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"

    def get_remaining_time_in_millis(self) -> int:
        return self.budget_ms if self.executed() - self.start < self.allowed else 0


def silence_worker_logs() -> None:
    """Send the worker's JSON log lines to /dev/null: still formatted and written, as on
    Lambda (where they go to CloudWatch), but kept out of the benchmark's output."""
    from continuum._worker import sqs_batch as worker

    handler: Any = worker.logger.registered_handler
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process
