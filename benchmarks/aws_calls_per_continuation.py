"""AWS calls per continuation: what one suspend-and-continue costs in S3 and SQS requests.

A task of ``TURNS`` one-step turns runs through ``LocalRuntime`` on in-process moto; each
emulated invocation gets a Lambda context whose time runs out after one live step, so every
turn ends in a suspension and the task continues ``TURNS - 1`` times. ``continuum._local.runtime``'s
``CallCounter`` (botocore ``after-call`` events) counts the calls made through the app's own
clients; the emulated event source's ReceiveMessage and DeleteMessage are Lambda's, not the
worker's, and are not counted (on AWS the event source mapping makes them).

Reported per continuation: S3 GET, S3 PUT, SQS send, SQS ChangeMessageVisibility (the claim
shortens the message's visibility so that a crashed invocation's message returns just after
its deadline, not after the queue's visibility timeout) and others, both averaged over the
whole task (start and finish included) and for one steady-state continuation.
Target: at most 4 calls per continuation.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from pydantic import BaseModel

from benchmarks import ScriptedContext, check, emit, silence_worker_logs
from continuum import Continuum, Status, TaskContext
from continuum._local.runtime import LocalRuntime, moto_backend

TURNS = 25


class Tally(BaseModel):
    n: int = 0
    notes: list[str] = []


def build(turns: int) -> tuple[Continuum, list[int]]:
    """An app with a task of ``turns`` turns, one step each; and the live-step counter."""
    app = Continuum()
    executed = [0]

    @app.step
    def work(i: int) -> str:
        executed[0] += 1
        return f"note {i}"

    @app.task(state=Tally)
    def tally(ctx: TaskContext[Tally]) -> int | None:
        ctx.state.notes.append(work(ctx.state.n))
        ctx.state.n += 1
        return ctx.state.n if ctx.state.n >= turns else None

    return app, executed


def drive(runtime: LocalRuntime, executed: list[int]) -> int:
    """Invoke until the queue is empty (the task finished); return the invocations."""
    invocations = 0
    while runtime.invoke_once(ScriptedContext(1, lambda: executed[0])) is not None:
        invocations += 1
    return invocations


def classify(calls: Counter[str]) -> dict[str, int]:
    kinds = {
        "s3:GetObject": "s3_get",
        "s3:PutObject": "s3_put",
        "sqs:SendMessage": "sqs_send",
        "sqs:ChangeMessageVisibility": "sqs_change_visibility",
    }
    out = dict.fromkeys([*kinds.values(), "other"], 0)
    for key, n in calls.items():
        out[kinds.get(key, "other")] += n
    return out


def run(turns: int) -> dict[str, Any]:
    silence_worker_logs()
    app, executed = build(turns)
    with moto_backend():
        runtime = LocalRuntime(app, budget_s=900)
        task_id = app.client().start("tally", {}, task_id="calls-1")
        start_calls = Counter(runtime.counter.calls)
        runtime.invoke_once(ScriptedContext(1, lambda: executed[0]))  # the first continuation
        before = Counter(runtime.counter.calls)
        runtime.invoke_once(ScriptedContext(1, lambda: executed[0]))  # one steady-state one
        steady = Counter(runtime.counter.calls) - before
        drive(runtime, executed)
        record = runtime.record(task_id)
    check(
        record.status == Status.SUCCEEDED,
        f"the task ended {record.status}: {record.error or record.suspend_reason}",
    )
    # One live step per invocation, each invocation but the last ending in a continuation.
    counters = record.counters
    check(
        (executed[0], counters.invocations, counters.continuations) == (turns, turns, turns - 1),
        f"{executed[0]} live steps, {counters.invocations} invocations and "
        f"{counters.continuations} continuations for {turns} one-step turns",
    )
    # The counter saw the continuation's own calls: its record write and its message.
    check(
        steady["s3:PutObject"] >= 1 and steady["sqs:SendMessage"] >= 1,
        f"one continuation counted {dict(steady)}: no record write or no send",
    )
    return {
        "continuations": record.counters.continuations,
        "invocations": record.counters.invocations,
        "all": runtime.counter.calls,
        "start": start_calls,
        "steady": steady,
    }


def main(quick: bool = False) -> None:
    out = run(6 if quick else TURNS)
    continuations = out["continuations"]
    emit("aws_calls.continuations", continuations)
    emit("aws_calls.invocations", out["invocations"])
    emit("aws_calls.start_task", sum(out["start"].values()), "calls")
    for key, n in sorted(out["all"].items()):
        emit(f"aws_calls.total.{key}", n, "calls")
    average = classify(out["all"])
    for kind, n in average.items():
        emit(f"aws_calls.per_continuation.{kind}", n / continuations, "calls")
    total = sum(average.values())
    visibility = average["sqs_change_visibility"]
    emit("aws_calls.per_continuation.all", total / continuations, "calls (target <= 4)")
    emit(
        "aws_calls.per_continuation.without_change_visibility",
        (total - visibility) / continuations,
        "calls",
    )
    steady = classify(out["steady"])
    for kind, n in steady.items():
        emit(f"aws_calls.steady_continuation.{kind}", n, "calls")
    emit("aws_calls.steady_continuation.all", sum(steady.values()), "calls")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
