"""The cost of waiting: invocations, AWS calls and dollars per day of durable sleep.

A task runs one step, sleeps ``DAYS`` days (``ctx.sleep``) and runs one more step, through
``LocalRuntime`` on in-process moto with the virtual clock. SQS delays a message 900 s at most,
so the sleep is a chain of timer hops: each is one Lambda invocation that reads the record,
lists the task's inbox, writes the record with generation + 1 and sends the next timer (96 a
day). A warm worker remembers the record its hop wrote and skips the GET when the next timer
comes back to it; on AWS, with many tasks waiting on one queue and 15 minutes between timers,
that is rare, so here the worker forgets it before every invocation and each hop pays its
GET. Counted per hop invocation, then per day of sleep:

- invocations: every handler call (each one Lambda request);
- the worker's S3 and SQS calls by operation (``CallCounter`` on the app's boto3 clients);
- the event source's ReceiveMessage and DeleteMessage: on AWS Lambda's pollers make them, and
  SQS bills them to the queue owner's account like any other request, so they are counted
  too. The local poller's empty receives (one or two per hop, as the virtual clock jumps) are
  reported but not priced: on AWS the pollers long-poll an idle queue whatever number of
  tasks wait in it, a cost per queue, not per task;
- the wall time of a hop invocation (the handler call), rounded up to Lambda's 1 ms billing.
  On moto every call is in-process; on AWS each is a network round trip, so a deployed hop
  lasts longer: ``lambda_duration_100ms_hop`` gives the duration price of a 100 ms hop.

**With a scheduler** (``LocalRuntime(scheduler=True)``: EventBridge Scheduler on moto, fired by
the runtime) a wait past one delayed message is one one-time schedule, whatever its length:
the parking invocation creates it, its fire (five minutes early) is one hop invocation that
sends one delayed message for the rest, and that message wakes the task. The sleeps of 1 hour,
1 day, 7 days and 30 days are run, and their invocations and requests counted (the worker's
S3, SQS and Scheduler calls, the poller's receives and deletes, and the fire itself: one
scheduler invocation and the SendMessage its target makes); they must be the same for all.
EventBridge Scheduler bills $1.00 per million invocations (creating, reading and deleting
schedules is not billed). What a wait adds to the task is the fire and its hop invocation.

Dollars per million task-days use the public list prices of ``_ops/prices.py`` (us-east-1, no free
tier), side by side with Step Functions standard (a Wait state: about two state transitions
whatever its length) and Lambda durable functions (a wait is one durable operation, then one
invocation to resume) for the same ``DAYS``-day wait.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from benchmarks import check, emit, median, silence_worker_logs
from continuum import Continuum, Status, TaskContext
from continuum._base.clock import real_monotonic
from continuum._local.runtime import InvocationReport, LocalRuntime, moto_backend
from continuum._ops.prices import PRICES
from continuum.backends.queue import QueueMessage

DAYS = 7
HOPS_PER_DAY = 86_400 // 900


#: The memory chosen for the worker (the SAM template's default).
LAMBDA_MEMORY_MB = 256

S3_PRICED = {
    "s3:GetObject": PRICES.s3_get,
    "s3:PutObject": PRICES.s3_put,
    "s3:ListObjectsV2": PRICES.s3_put,
    "s3:PutObjectTagging": PRICES.s3_put,
}


class Nap(BaseModel):
    days: float = DAYS


def nap_app() -> tuple[Continuum, list[float]]:
    """Task ``nap``: a step, ``ctx.sleep(days)``, a step. The list gets the real monotonic time
    at which each live step started."""
    app = Continuum()
    started: list[float] = []

    @app.step
    def note(what: str) -> str:
        started.append(real_monotonic())
        return what

    @app.task(state=Nap)
    def nap(ctx: TaskContext[Nap]) -> str:
        note("before")
        ctx.sleep(timedelta(days=ctx.state.days))
        return note("after")

    return app, started


class CountedSource:
    """The runtime's event source (Lambda's poller), counted: ReceiveMessage that delivered,
    empty ReceiveMessage, and DeleteMessage."""

    def __init__(self, source: Any, calls: Counter[str]) -> None:
        self.source = source
        self.calls = calls

    def receive(self, *, max_messages: int = 1, wait_s: int = 0) -> list[QueueMessage]:
        got: list[QueueMessage] = self.source.receive(max_messages=max_messages, wait_s=wait_s)
        self.calls["poller:ReceiveMessage" if got else "poller:ReceiveMessage(empty)"] += 1
        return got

    def delete(self, receipt_handle: str) -> None:
        self.source.delete(receipt_handle)
        self.calls["poller:DeleteMessage"] += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


def count_source(runtime: LocalRuntime) -> Counter[str]:
    """Count the runtime's event-source calls from now on (in a Counter of their own)."""
    calls: Counter[str] = Counter()
    runtime.source = CountedSource(runtime.source, calls)
    return calls


class TimedHandler:
    """Wraps ``app.handler`` to keep the real wall time and the CPU time of each call (moto
    runs in process, in the same thread, so its work is in both)."""

    def __init__(self, app: Continuum) -> None:
        self.app = app
        self.handler = app.handler
        self.seconds: list[float] = []
        self.cpu: list[float] = []
        app.handler = self

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        worker = self.app._worker
        if worker is not None:  # a fresh environment, or one busy with other tasks
            worker.recent.clear()
        started, cpu = real_monotonic(), time.thread_time()
        try:
            return self.handler(event, context)
        finally:
            self.seconds.append(real_monotonic() - started)
            self.cpu.append(time.thread_time() - cpu)


@dataclass
class Measured:
    days: float
    hops: int
    invocations: int
    hop_calls: Counter[str]  # summed over the hop invocations (worker and poller)
    hop_seconds: list[float]
    hop_cpu: list[float]
    wake_calls: Counter[str]  # the invocation that woke the task (and finished it)
    record_bytes: int


def measure(days: float, *, backend: str = "moto") -> Measured:
    """Run the nap task; attribute each invocation's calls to it, hop or not."""
    app, _ = nap_app()
    with moto_backend() if backend == "moto" else contextlib.nullcontext():
        runtime = LocalRuntime(app, budget_s=900, backend=backend, virtual_time=True)
        poller = count_source(runtime)
        timed = TimedHandler(app)
        hop_calls: Counter[str] = Counter()
        hop_seconds: list[float] = []
        hop_cpu: list[float] = []
        last: list[Counter[str]] = [Counter()]
        seen = [Counter[str]()]

        def everything() -> Counter[str]:
            return Counter(runtime.counter.calls) + Counter(poller)

        def on_invocation(invocation: InvocationReport) -> None:
            now = everything()
            delta = now - seen[0]
            seen[0] = now
            last[0] = delta
            if invocation.hop:
                hop_calls.update(delta)
                hop_seconds.append(timed.seconds[-1])
                hop_cpu.append(timed.cpu[-1])

        with runtime.time.running():
            task_id = app.client().start("nap", {"days": days})
            seen[0] = everything()
            summary = runtime.drive(task_id, on_invocation=on_invocation, timeout_s=3600)
        record = runtime.record(task_id)
        record_bytes = len(runtime.observer_store.get(app.records.record_key(task_id)).body)
    check(summary.status == Status.SUCCEEDED.value, f"the nap ended {summary.status}")
    # Each hop: one invocation, timed; the timer it received, the record it wrote, the next
    # timer it sent, all counted.
    hops, timers = record.counters.hops, math.ceil(days * 86_400 / 900)
    check(hops == timers - 1, f"a {days:g}-day sleep made {hops} hops, not {timers - 1}")
    check(len(hop_seconds) == hops, f"{len(hop_seconds)} hop invocations timed, of {hops}")
    check(
        hop_calls["poller:ReceiveMessage"] == hops
        and min(hop_calls["s3:PutObject"], hop_calls["sqs:SendMessage"]) >= hops,
        f"{hops} hops counted {dict(hop_calls)}",
    )
    return Measured(
        days=days,
        hops=record.counters.hops,
        invocations=runtime.invocations,
        hop_calls=hop_calls,
        hop_seconds=hop_seconds,
        hop_cpu=hop_cpu,
        wake_calls=last[0],
        record_bytes=record_bytes,
    )


def billed_ms(seconds: float) -> int:
    """Lambda bills duration rounded up to the next millisecond."""
    return max(1, math.ceil(seconds * 1000))


def dollars_per_hop(calls_per_hop: dict[str, float], hop_ms: int) -> dict[str, float]:
    """What one hop costs, by line."""
    gb = LAMBDA_MEMORY_MB / 1024
    s3 = sum(n * S3_PRICED.get(key, 0.0) for key, n in calls_per_hop.items())
    sqs = sum(
        n
        for key, n in calls_per_hop.items()
        if key.startswith("sqs:") or (key.startswith("poller:") and "(empty)" not in key)
    )
    return {
        "lambda_requests": PRICES.lambda_request,
        "lambda_duration": gb * hop_ms / 1000 * PRICES.lambda_gb_s,
        "s3_requests": s3,
        "sqs_requests": sqs * PRICES.sqs_request,
    }


def report(measured: Measured) -> None:
    """Print the figures: calls per hop and per day, then dollars per million task-days."""
    hops, days = measured.hops, measured.days
    per_hop = {key: n / hops for key, n in sorted(measured.hop_calls.items())}
    emit("wait_cost.days", days, "days of sleep (moto, virtual clock)")
    emit("wait_cost.hops", hops, "timer hops (96 a day; the last timer wakes the task)")
    emit("wait_cost.invocations", measured.invocations, "handler calls (start, hops, wake)")
    emit("wait_cost.per_day.invocations", HOPS_PER_DAY, "invocations/day (one per hop)")
    for key, n in per_hop.items():
        emit(f"wait_cost.per_hop.{key}", n, "calls")
    for key, n in per_hop.items():
        emit(f"wait_cost.per_day.{key}", n * HOPS_PER_DAY, "calls/day")
    billed = sum(n for key, n in per_hop.items() if "(empty)" not in key) * HOPS_PER_DAY
    emit("wait_cost.per_day.aws_calls_billed", billed, "calls/day (worker and poller)")
    # Once per wait. Under the virtual clock it lists the inbox twice more than it would on
    # AWS: an inbox listing is stamped with the real clock, so it always looks stale.
    for key, n in sorted(measured.wake_calls.items()):
        emit(f"wait_cost.wake_invocation.{key}", n, "calls (once per wait)")
    hop_ms = billed_ms(median(measured.hop_seconds))
    emit("wait_cost.hop.wall", median(measured.hop_seconds) * 1000, "ms (median, moto)")
    emit("wait_cost.hop.cpu", median(measured.hop_cpu) * 1000, "ms (median, moto)")
    emit("wait_cost.hop.billed", hop_ms, f"ms at {LAMBDA_MEMORY_MB} MB arm64")

    hops_per_million_days = 1e6 * HOPS_PER_DAY
    total = 0.0
    for name, usd in dollars_per_hop(per_hop, hop_ms).items():
        total += usd * hops_per_million_days
        emit(f"wait_cost.usd_per_million_task_days.{name}", usd * hops_per_million_days, "USD")
    emit("wait_cost.usd_per_million_task_days.continuum", total, "USD (the sum)")
    at_100ms = dollars_per_hop(per_hop, 100)["lambda_duration"] * hops_per_million_days
    emit("wait_cost.usd_per_million_task_days.lambda_duration_100ms_hop", at_100ms, "USD")
    # Every hop leaves a superseded record version (bucket versioning), kept 30 days.
    gb_months = measured.record_bytes * HOPS_PER_DAY / 1e9 * 1e6
    emit("wait_cost.record_bytes", measured.record_bytes, "B per record version")
    emit(
        "wait_cost.usd_per_million_task_days.s3_versions_kept_30d",
        gb_months * PRICES.s3_gb_month,
        "USD (not in the sum)",
    )
    sfn = PRICES.sfn_transition * PRICES.sfn_transitions_per_wait
    sfn_per_million_days = sfn / days * 1e6
    emit("wait_cost.usd_per_million_task_days.step_functions_standard", sfn_per_million_days, "USD")
    durable = (PRICES.durable_operation + PRICES.lambda_request) / days * 1e6
    emit("wait_cost.usd_per_million_task_days.lambda_durable_functions", durable, "USD")
    emit("wait_cost.ratio.continuum_vs_step_functions", total / sfn_per_million_days, "x")
    emit("wait_cost.ratio.continuum_vs_durable_functions", total / durable, "x")


#: EventBridge Scheduler, per invocation (us-east-1 list price, after the free tier).
SCHEDULER_INVOCATION = 1.00 / 1_000_000
#: The waits measured with a scheduler: 1 hour, 1 day, 7 days, 30 days.
SCHEDULED_DAYS = {"1h": 1 / 24, "1d": 1.0, "7d": 7.0, "30d": 30.0}


@dataclass
class Scheduled:
    days: float
    invocations: int
    calls: Counter[str]  # the whole run: worker, poller, and the fire
    hop_calls: Counter[str]  # the fire's hop invocation (worker and poller)
    hop_seconds: list[float]


def measure_scheduled(days: float) -> Scheduled:
    """Run the nap task with a scheduler on moto; count the run's calls and its hop's."""
    app, _ = nap_app()
    with moto_backend():
        runtime = LocalRuntime(app, budget_s=900, backend="moto", virtual_time=True, scheduler=True)
        poller = count_source(runtime)
        timed = TimedHandler(app)
        hop_calls: Counter[str] = Counter()
        hop_seconds: list[float] = []
        seen = [Counter[str]()]
        fires = [0]
        fire_schedules = runtime.fire_schedules

        def counted_fire() -> int:
            fired = fire_schedules()
            fires[0] += fired
            return fired

        runtime.fire_schedules = counted_fire  # type: ignore[method-assign]

        def everything() -> Counter[str]:
            return Counter(runtime.counter.calls) + Counter(poller)

        def on_invocation(invocation: InvocationReport) -> None:
            now = everything()
            delta, seen[0] = now - seen[0], now
            if invocation.hop:
                hop_calls.update(delta)
                hop_seconds.append(timed.seconds[-1])

        with runtime.time.running():
            task_id = app.client().start("nap", {"days": days})
            summary = runtime.drive(task_id, on_invocation=on_invocation, timeout_s=600)
        record = runtime.record(task_id)
    calls = billed(everything())
    calls["scheduler:Invocation"] += fires[0]
    calls["sqs:SendMessage(fire)"] += fires[0]
    check(summary.status == Status.SUCCEEDED.value, f"the nap ended {summary.status}")
    check(calls["scheduler:CreateSchedule"] == 1, f"{days:g} days: {dict(calls)}")
    check(fires[0] == 1, f"{days:g} days: {fires[0]} fires")
    check(record.counters.hops == 1, f"{days:g} days made {record.counters.hops} hops, not 1")
    check(len(hop_seconds) == 1, "the hop invocation was not timed")
    return Scheduled(days, runtime.invocations, calls, billed(hop_calls), hop_seconds)


def billed(calls: Counter[str]) -> Counter[str]:
    """The calls AWS bills: the poller's empty receives left out (a cost per queue, not per
    task, and as many as the virtual clock's jumps)."""
    return Counter({key: n for key, n in calls.items() if "(empty)" not in key})


def billed_requests(calls: Counter[str]) -> int:
    return sum(calls.values())


def dollars_of(calls: dict[str, float], invocations: float, ms: int) -> float:
    """What these calls and Lambda invocations cost (SQS, S3, Scheduler, Lambda)."""
    lines = dollars_per_hop(calls, ms)
    lines["lambda_requests"] *= invocations
    lines["lambda_duration"] *= invocations
    fire = calls.get("scheduler:Invocation", 0) * SCHEDULER_INVOCATION
    fire += calls.get("sqs:SendMessage(fire)", 0) * PRICES.sqs_request
    return sum(lines.values()) + fire


def report_scheduled(runs: dict[str, Scheduled], chain: Measured | None) -> None:
    """Invocations and requests per wait for each length, the same for all; dollars."""
    first = next(iter(runs.values()))
    for label, run in runs.items():
        emit(f"wait_cost.scheduler.{label}.invocations", run.invocations, "per wait (moto)")
        emit(f"wait_cost.scheduler.{label}.requests", billed_requests(run.calls), "per wait")
        check(
            run.invocations == first.invocations and run.calls == first.calls,
            f"a {run.days:g}-day wait cost {run.invocations} invocations and {dict(run.calls)}, "
            f"a {first.days:g}-day one {first.invocations} and {dict(first.calls)}",
        )
    for key, n in sorted(first.calls.items()):
        emit(f"wait_cost.scheduler.per_wait.{key}", n, "calls (the whole run: start to end)")
    week = runs["7d"]
    ms = billed_ms(median(week.hop_seconds))
    # What the wait adds to the task: the fire, and the invocation that hops on it.
    added = Counter(week.hop_calls)
    added["scheduler:Invocation"] += 1
    added["sqs:SendMessage(fire)"] += 1
    added["scheduler:CreateSchedule"] += 1  # in the parking invocation (not billed)
    per_wait = dollars_of(dict(added), 1, ms)
    per_million_days = per_wait / week.days * 1e6
    emit("wait_cost.scheduler.per_wait.added_requests", billed_requests(added), "per wait")
    emit("wait_cost.scheduler.per_wait.added_invocations", 1, "the fire's hop")
    emit("wait_cost.scheduler.hop.billed", ms, f"ms at {LAMBDA_MEMORY_MB} MB arm64 (moto)")
    emit("wait_cost.scheduler.usd_per_million_task_days", per_million_days, "USD (7-day wait)")
    sfn = PRICES.sfn_transition * PRICES.sfn_transitions_per_wait / week.days * 1e6
    durable = (PRICES.durable_operation + PRICES.lambda_request) / week.days * 1e6
    emit("wait_cost.scheduler.ratio_vs_step_functions", per_million_days / sfn, "x")
    emit("wait_cost.scheduler.ratio_vs_durable_functions", per_million_days / durable, "x")
    check(per_million_days > 0, "no cost counted")
    if chain is not None:
        # The hop chain makes ceil(w / 900) - 1 hops; the scheduler one hop and one fire.
        hop = dollars_of({k: n / chain.hops for k, n in chain.hop_calls.items()}, 1, ms)
        fire = per_wait - dollars_of(dict(week.hop_calls), 1, ms)
        hops_cheaper = math.ceil(1 + fire / hop) - 1
        emit("wait_cost.scheduler.hop_usd", hop * 1e6, "USD per million hops")
        emit("wait_cost.scheduler.fire_usd", fire * 1e6, "USD per million fires")
        emit(
            "wait_cost.scheduler.hop_chain_cheaper_up_to_s",
            (hops_cheaper + 1) * 900,
            "s of wait (beyond it the schedule is cheaper)",
        )


def main(quick: bool = False) -> None:
    silence_worker_logs()
    measured = measure(0.25 if quick else DAYS)
    report(measured)
    days = {k: v for k, v in SCHEDULED_DAYS.items() if k != "30d"} if quick else SCHEDULED_DAYS
    report_scheduled({label: measure_scheduled(d) for label, d in days.items()}, measured)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
