"""Wake latency: from ``complete_callback`` to the waiting task running again.

Real clock, no virtual time. A task creates a callback (a one-hour timeout, so its timer sits
in the queue), hands its id out in a step, waits for the answer and then runs one more step,
which notes ``real_monotonic()`` as it starts. ``LocalRuntime.drive`` runs in a thread as
Lambda's event source would: it polls the queue every ``POLL_INTERVAL_S`` while nothing is
visible. Once the task is ``waiting`` and its invocation has returned, the main thread calls
``client.complete_callback``; the latency is from that call to the start of the next step:
the answer's S3 writes and the wake message, the poll interval, then the invocation's fence
read, inbox listing, claim and replay.

Medians and p95 over ``REPEATS`` tasks, each backend in turn (memory, then moto in process).
The answer's own call (``complete_callback``) is reported apart. On AWS the wake is bounded
by Lambda's long-polling pollers and a warm or cold start instead of this loop's interval.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel

from benchmarks import check, emit, median, silence_worker_logs
from continuum import Continuum, Status, TaskContext
from continuum._base.clock import real_monotonic
from continuum._local.runtime import POLL_INTERVAL_S, LocalRuntime, moto_backend

REPEATS = 20


class Ask(BaseModel):
    pass


def callback_app() -> tuple[Continuum, dict[str, Any]]:
    """Task ``ask``: a callback handed out, its answer awaited, then a step that stamps."""
    app = Continuum()
    seen: dict[str, Any] = {"ids": [], "woke": []}

    @app.step
    def hand_out(callback_id: str) -> str:
        seen["ids"].append(callback_id)
        return callback_id

    @app.step
    def after(answer: Any) -> Any:
        seen["woke"].append(real_monotonic())
        return answer

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("approval", timeout=3600)
        hand_out(cb.id)
        return after(cb.result())

    return app, seen


def p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def measure(backend: str, repeats: int) -> tuple[list[float], list[float]]:
    """Latencies (s) from the answer to the next step, and the answer calls' own durations."""
    app, seen = callback_app()
    runtime = LocalRuntime(app, budget_s=5, backend=backend)
    client = app.client()
    latencies: list[float] = []
    answering: list[float] = []
    for repeat in range(repeats + 1):  # the first one warms the worker up
        task_id = client.start("ask", {}, task_id=f"wake-{backend}-{repeat}")
        ids = len(seen["ids"])
        invocations = runtime.invocations
        driver = threading.Thread(
            target=runtime.drive,
            args=(task_id,),
            kwargs={"stop_when_waiting": False, "timeout_s": 60},
            daemon=True,
        )
        driver.start()
        deadline = real_monotonic() + 30
        while not (
            len(seen["ids"]) > ids
            and runtime.invocations > invocations
            and runtime.record(task_id).status == Status.WAITING
        ):
            assert real_monotonic() < deadline, "the task never waited"
            time.sleep(0.005)
        # Let the invocation return (its timer sent, its message deleted) and the poller idle;
        # the offset moves the answer's phase against the poll interval.
        time.sleep(0.05 + POLL_INTERVAL_S * (repeat % 5) / 5)
        check(len(seen["woke"]) == repeat, f"{task_id} ran on before its answer was sent")
        started = real_monotonic()
        client.complete_callback(seen["ids"][-1], {"approved": True})
        answered = real_monotonic()
        driver.join(timeout=60)
        check(not driver.is_alive(), f"{task_id} did not finish after its answer")
        check(runtime.record(task_id).status == Status.SUCCEEDED, f"{task_id} did not succeed")
        # The step after the wait ran once for this task, after the answer was sent.
        check(
            len(seen["woke"]) == repeat + 1 and seen["woke"][-1] > started,
            f"{task_id}: {len(seen['woke'])} wakes stamped (of {repeat + 1}), or the last one "
            "before the answer",
        )
        if repeat:
            latencies.append(seen["woke"][-1] - started)
            answering.append(answered - started)
    return latencies, answering


def main(quick: bool = False) -> None:
    silence_worker_logs()
    repeats = 3 if quick else REPEATS
    emit("wake_latency.poll_interval", POLL_INTERVAL_S * 1000, "ms (the local event source)")
    emit("wake_latency.repeats", repeats, "tasks per backend")
    for backend in ("memory", "moto"):
        if backend == "moto":
            with moto_backend():
                latencies, answering = measure(backend, repeats)
        else:
            latencies, answering = measure(backend, repeats)
        ms = [s * 1000 for s in latencies]
        emit(f"wake_latency.{backend}.median", median(ms), "ms (complete_callback -> next step)")
        emit(f"wake_latency.{backend}.p95", p95(ms), "ms")
        emit(f"wake_latency.{backend}.max", max(ms), "ms")
        emit(
            f"wake_latency.{backend}.complete_callback.median",
            median(s * 1000 for s in answering),
            "ms (the answer's own call)",
        )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
