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
The answer's own call (``complete_callback``) is reported apart.

``wake_latency.link.*`` is the same with the answer given through the task's callback link:
a form POST (Approve) handed to the link function's handler as a function URL event
(``app.callback_link_handler``, in process: no network), from the POST to the next step. It
adds the token's check and the endpoint's reads of the record and inbox before the answer.

On AWS the wake is bounded by Lambda's long-polling pollers and a warm or cold start instead of
this loop's interval.
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


#: The link endpoint's base URL in the link runs (never fetched: the POST is handed in).
LINK_BASE = "https://links.bench.test"
#: What the link's form posts: Approve, no comment.
LINK_FORM = "decision=approve&comment="


def callback_app(*, links: bool = False) -> tuple[Continuum, dict[str, Any]]:
    """Task ``ask``: a callback handed out, its answer awaited, then a step that stamps."""
    app = Continuum(signing_key="bench-key", callback_url=LINK_BASE) if links else Continuum()
    seen: dict[str, Any] = {"ids": [], "woke": [], "answers": []}

    @app.step
    def hand_out(callback_id: str, url: str | None = None) -> str:
        seen["ids"].append(url if links else callback_id)
        return callback_id

    @app.step
    def after(answer: Any) -> Any:
        seen["woke"].append(real_monotonic())
        seen["answers"].append(answer)
        return answer

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> Any:
        return after(ctx.wait_for_callback(hand_out, name="approval", timeout=3600))

    return app, seen


def p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def link_post(app: Continuum, url: str) -> dict[str, Any]:
    """The form POST of ``url``'s page, as its function URL hands it to the link function."""
    path = url.removeprefix(LINK_BASE)
    event = {
        "version": "2.0",
        "rawPath": path,
        "headers": {"content-type": "application/x-www-form-urlencoded"},
        "requestContext": {"http": {"method": "POST", "path": path}},
        "body": LINK_FORM,
        "isBase64Encoded": False,
    }
    return app.callback_link_handler(event, None)  # type: ignore[arg-type]


def measure(backend: str, repeats: int, *, links: bool = False) -> tuple[list[float], list[float]]:
    """Latencies (s) from the answer to the next step, and the answer calls' own durations."""
    app, seen = callback_app(links=links)
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
        if links:
            check(seen["ids"][-1].startswith(LINK_BASE + "/cb/"), f"{task_id} has no link")
            reply = link_post(app, seen["ids"][-1])
            check(reply["statusCode"] == 200, f"the link answered {reply['statusCode']}")
        else:
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
        wanted = {"approved": True, "comment": ""} if links else {"approved": True}
        check(seen["answers"][-1] == wanted, f"{task_id} took {seen['answers'][-1]!r}")
        if repeat:
            latencies.append(seen["woke"][-1] - started)
            answering.append(answered - started)
    return latencies, answering


def main(quick: bool = False) -> None:
    silence_worker_logs()
    repeats = 3 if quick else REPEATS
    emit("wake_latency.poll_interval", POLL_INTERVAL_S * 1000, "ms (the local event source)")
    emit("wake_latency.repeats", repeats, "tasks per backend")
    for links in (False, True):
        for backend in ("memory", "moto"):
            if backend == "moto":
                with moto_backend():
                    latencies, answering = measure(backend, repeats, links=links)
            else:
                latencies, answering = measure(backend, repeats, links=links)
            ms = [s * 1000 for s in latencies]
            name = f"wake_latency.link.{backend}" if links else f"wake_latency.{backend}"
            answer = "the link's POST" if links else "complete_callback"
            emit(f"{name}.median", median(ms), f"ms ({answer} -> next step)")
            emit(f"{name}.p95", p95(ms), "ms")
            emit(f"{name}.max", max(ms), "ms")
            call = "post" if links else "complete_callback"
            emit(
                f"{name}.{call}.median",
                median(s * 1000 for s in answering),
                "ms (the answer's own call)",
            )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
