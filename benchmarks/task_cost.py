"""What a task costs in dollars: the sample research agent, beside Step Functions and
durable functions on the same workload.

The research agent (``samples/research_agent.py``: a model call and its tool calls per turn,
with the sample's latencies) runs on in-process moto through ``LocalRuntime`` with the
budget of ``make demo``, so it continues several times. What it spent is what its record
says (``record.usage``: invocations, billed Lambda milliseconds at the function's memory, S3
requests by kind, SQS requests, the event source's receive and delete), priced by
``continuum._ops.prices``, the one price list. The step time itself (the work, which any of the
three pays the same) is the sum of the recorded step durations; the rest is orchestration.

The same workload elsewhere, from public prices, counting only what the workload makes them
bill (their free tiers, and durable functions' data written and retained, not counted):

- Step Functions standard: each step a Lambda Task state (one state transition, one Lambda
  request, the step's duration billed), a Choice state per turn, plus the start;
- Lambda durable functions: each step one durable operation, one Lambda request per
  invocation (as many as continuum's), the step time billed.

Prints dollars per task and per million tasks for each, and continuum's orchestration per
million continuations.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from benchmarks import check, emit, silence_worker_logs
from benchmarks.wait_cost import LAMBDA_MEMORY_MB
from continuum._local.runtime import LocalRuntime, moto_backend
from continuum._ops.prices import PRICES, dollars

#: The function's memory, as the emulated Lambda context reports it (and the template sets).
MEMORY_GB = LAMBDA_MEMORY_MB / 1024


def run(budget_s: float, scale: float) -> tuple[Any, Any]:
    """The research agent run to its end; its record and its summary."""
    from samples.research_agent import app

    runtime = LocalRuntime(app, budget_s=budget_s, backend="moto")
    summary = runtime.run("research", {"topic": "tides", "latency_scale": scale})
    check(summary.status == "succeeded", f"the research agent ended {summary.status}")
    return runtime.record(summary.task_id), summary


def step_durations(record: Any) -> list[float]:
    return [step.duration_s for run in record.history for step in run.steps]


def main(quick: bool = False) -> None:
    silence_worker_logs()
    budget_s, scale = (0.5, 0.05) if quick else (2.5, 1.0)
    with moto_backend():
        record, summary = run(budget_s, scale)
    usage = record.usage
    spent = dollars(usage)
    durations = step_durations(record)
    steps, turns = len(durations), record.counters.turns
    counters = record.counters
    # What is priced is what ran: every live step, every invocation, each one's calls.
    check(
        steps == counters.steps_executed > 0 and sum(durations) > 0,
        f"{steps} steps in the history, {counters.steps_executed} run live",
    )
    check(
        usage.invocations == counters.invocations > 1 and usage.lambda_ms > 0,
        f"{usage.invocations} invocations billed ({usage.lambda_ms} ms), {counters.invocations} "
        "run: the task must continue for its continuations to be priced",
    )
    check(
        usage.sqs_send >= counters.continuations and usage.s3_put >= counters.invocations,
        f"{usage.sqs_send} sends and {usage.s3_put} PUTs counted for "
        f"{counters.continuations} continuations of {counters.invocations} invocations",
    )
    continuations = max(1, record.counters.continuations)
    lambda_gb_s = PRICES.lambda_gb_s
    work = sum(math.ceil(d * 1000) / 1000 for d in durations) * MEMORY_GB * lambda_gb_s
    orchestration = spent["total"] - work

    sfn_transitions = steps + turns + 1
    sfn = (
        sfn_transitions * PRICES.sfn_transition + steps * PRICES.lambda_request + work
    )  # each step its own Lambda invocation
    durable = steps * PRICES.durable_operation + usage.invocations * PRICES.lambda_request + work

    emit("task_cost.workload.steps", steps, "steps (research agent)")
    emit("task_cost.workload.turns", turns, "turns")
    emit("task_cost.workload.invocations", usage.invocations, "invocations")
    emit("task_cost.workload.continuations", continuations, "continuations")
    emit("task_cost.workload.step_seconds", sum(durations), "s of step time")
    emit("task_cost.workload.lambda_ms", usage.lambda_ms, "ms billed (continuum)")
    emit("task_cost.continuum.aws_requests", summary.s3_calls + summary.sqs_calls, "calls")
    for part in ("lambda", "s3", "sqs"):
        emit(f"task_cost.continuum.usd_per_million_tasks.{part}", spent[part] * 1e6, "USD")
    emit("task_cost.continuum.usd_per_task", spent["total"], "USD")
    emit("task_cost.continuum.usd_per_million_tasks", spent["total"] * 1e6, "USD")
    emit("task_cost.work.usd_per_million_tasks", work * 1e6, "USD (the step time, in all)")
    emit("task_cost.continuum.orchestration_per_million_tasks", orchestration * 1e6, "USD")
    emit(
        "task_cost.continuum.orchestration_per_million_continuations",
        orchestration / continuations * 1e6,
        "USD",
    )
    emit("task_cost.step_functions_standard.usd_per_million_tasks", sfn * 1e6, "USD")
    emit(
        "task_cost.step_functions_standard.orchestration_per_million_tasks",
        (sfn - work) * 1e6,
        f"USD ({sfn_transitions} transitions, {steps} Lambda requests a task)",
    )
    emit("task_cost.lambda_durable_functions.usd_per_million_tasks", durable * 1e6, "USD")
    emit(
        "task_cost.lambda_durable_functions.orchestration_per_million_tasks",
        (durable - work) * 1e6,
        f"USD ({steps} operations, {usage.invocations} requests a task)",
    )
    emit("task_cost.ratio.continuum_vs_step_functions", spent["total"] / sfn, "x")
    emit("task_cost.ratio.continuum_vs_durable_functions", spent["total"] / durable, "x")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
