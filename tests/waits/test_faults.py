"""Faults around waits that once failed or stranded a task, found by the fault run
(``make chaos``), each reduced to a small reproducer: a store fault polling the inbox or
reading a signal, a lost wake, a wake a dead worker claimed with, a cancel the claim cannot
read.

The tests with a task run in both flavours (``tests/waits/flavours.py``): the task ``def``, and
``async def`` awaiting its steps and waits. The fence's verdict on a wake has no task.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import CallbackError, Continuum, Status, TaskContext
from continuum.backends.queue import QueueError
from continuum.backends.store import TransientStoreError
from tests.conftest import (
    ScriptedContext,
    StoreFaults,
    drain,
    sends_refused,
    set_visibility_timeout,
)
from tests.support import Continuation, Lease, LocalRuntime, TaskRecord, Verdict, fence, utcnow
from tests.waits.flavours import Flavour


class Count(BaseModel):
    done: list[int] = []


def fail_inbox_once(faults: StoreFaults, operation: str, after: int = 0) -> list[str]:
    """The ``after``-th call of ``operation`` on a key under an inbox answers S3's 500."""
    failed: list[str] = []
    seen = [0]

    def hook(call, key, *args, **kwargs):
        if "/inbox/" in key and not failed:
            seen[0] += 1
            if seen[0] > after:
                failed.append(key)
                raise TransientStoreError(f"{key}: InternalError")
        return call(key, *args, **kwargs)

    faults.around(operation, hook)
    return failed


def test_a_transient_fault_on_the_inbox_poll_of_a_running_turn_does_not_fail_the_task(flavour):
    """A running task lists its inbox at a step boundary every ``inbox_poll_s`` (to see a
    cancel). One LIST that S3 answered 500 (after botocore's retries) failed the whole task
    with TransientStoreError, where a failed record write only costs a fresh invocation."""
    app = Continuum(visibility_margin_s=None, inbox_poll_s=0.001)

    @flavour.step(app)
    def work(i: int) -> int:
        time.sleep(0.002)
        return i

    def count(ctx: TaskContext[Count]) -> list[int] | None:
        for _ in range(3):
            ctx.state.done.append(work(len(ctx.state.done)))
        return ctx.state.done if len(ctx.state.done) >= 6 else None

    async def count_async(ctx: TaskContext[Count]) -> list[int] | None:
        for _ in range(3):
            ctx.state.done.append(await work(len(ctx.state.done)))
        return ctx.state.done if len(ctx.state.done) >= 6 else None

    flavour.task(app, count, count_async, state=Count)

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    task_id = app.client().start("count", {})
    failed = fail_inbox_once(StoreFaults(app), "list_keys", after=1)
    record = drain(runtime, task_id, lambda i: ScriptedContext(None, lambda: 0))
    assert failed, "the inbox was never listed mid-turn"
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == [0, 1, 2, 3, 4, 5]


def listen_app(flavour: Flavour) -> Continuum:
    """Task ``listen``: waits for signal ``go`` (no timeout) and returns its payload."""
    app = Continuum(visibility_margin_s=None)

    def listen(ctx: TaskContext[Count]) -> Any:
        signal = ctx.wait_for_signal("go")
        return signal.payload if signal is not None else None

    async def listen_async(ctx: TaskContext[Count]) -> Any:
        signal = await ctx.wait_for_signal_async("go")
        return signal.payload if signal is not None else None

    flavour.task(app, listen, listen_async, state=Count)
    return app


def test_a_transient_fault_reading_a_signal_does_not_fail_the_task(flavour):
    """The signal a wait takes is read (GET) from the inbox; a 500 there failed the task."""
    app = listen_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    client = app.client()
    task_id = client.start("listen", {})
    client.signal(task_id, "go", {"k": 1}, signal_id="s1")
    failed = fail_inbox_once(StoreFaults(app), "get")
    record = drain(runtime, task_id, lambda i: ScriptedContext(None, lambda: 0))
    assert failed, "the signal was never read"
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == {"k": 1}


def test_a_retried_signal_whose_wake_was_lost_wakes_the_task(flavour):
    """``client.signal`` writes the signal, then wakes the task. If the wake's send failed
    (or the sender died between the two), the sender tries again with the same ``signal_id``
    (an at-least-once sender does); the signal was already there, so the retry was a no-op
    that sent no wake either, and a task waiting without a timeout waited for ever."""
    app = listen_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    client = app.client()
    task_id = client.start("listen", {})
    runtime.invoke_once()
    assert runtime.record(task_id).status == Status.WAITING
    assert runtime.invoke_once() is None  # waiting, no timeout: no message until a wake
    with sends_refused(runtime), pytest.raises(QueueError):
        client.signal(task_id, "go", {"k": 1}, signal_id="s1")  # landed; its wake did not
    client.signal(task_id, "go", {"k": 1}, signal_id="s1")  # the sender's retry
    assert runtime.invoke_once() is not None, "the retry sent no wake: the task waits for ever"
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED, record.status
    assert record.result == {"k": 1}


def test_a_retried_callback_answer_whose_wake_was_lost_wakes_the_task(flavour):
    """The same for ``complete_callback``: the retry is refused ("already answered", the
    task keeps the first), but the wake the first attempt never sent was not sent either."""
    app = Continuum(visibility_margin_s=None)

    def ask(ctx: TaskContext[Count]) -> Any:
        return ctx.create_callback("answer").result()

    async def ask_async(ctx: TaskContext[Count]) -> Any:
        return ctx.create_callback("answer").result()

    flavour.task(app, ask, ask_async, state=Count)

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    client = app.client()
    task_id = client.start("ask", {})
    runtime.invoke_once()
    assert runtime.record(task_id).status == Status.WAITING
    (callback_id,) = [w.id for w in client.status(task_id).waiting_for if w.kind == "callback"]
    with sends_refused(runtime), pytest.raises(QueueError):
        client.complete_callback(callback_id, {"ok": 1})  # landed; its wake did not
    with pytest.raises(CallbackError, match="already answered"):
        client.complete_callback(callback_id, {"ok": 1})  # the sender's retry
    assert runtime.invoke_once() is not None, "the retry sent no wake: the task waits for ever"
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED, record.status
    assert record.result == {"ok": 1}


@pytest.mark.parametrize("lease", ["expired", "live"])
def test_the_wake_a_dead_worker_claimed_with_comes_back_to_run_the_task(lease):
    """A child's report wakes its parent with generation 0 (it does not know the parent's);
    the fence lets such a wake claim a waiting parent at any generation. If that worker died
    after its claim, the wake came back and was judged stale (generation 0 < the record's),
    and the parent's timer duplicate of a live lease: both acknowledged, the record stayed
    ``running`` with nothing in the queue, for ever. The message a lease was taken for now
    stands for the current generation (run it, or retry while the lease is live)."""
    now = utcnow()
    expires = now + (timedelta(seconds=-1) if lease == "expired" else timedelta(minutes=5))
    record = TaskRecord(task_id="p", task_name="parent", status=Status.RUNNING, generation=3)
    record.lease = Lease(owner="dead", expires_at=expires, message_id="m-wake")
    wake = Continuation(
        task_id="p", generation=0, reason="child p.0.c succeeded", kind="wake", sent_at=0.0
    )
    verdict = fence(record, wake, message_id="m-wake", now=now)
    assert verdict == (Verdict.RUN if lease == "expired" else Verdict.RETRY_LATER)
    assert fence(record, wake, message_id="m-other", now=now) == Verdict.STALE


def test_a_cancel_the_claim_cannot_read_is_delivered_later_and_crashes_nothing(flavour):
    """After the previous fix, a store error reading the cancel request that the claim's
    listing showed (before the turns start) raised Suspend out of the handler: the worker
    process crashed. The request is now read at the turn's next look instead."""
    app = Continuum(visibility_margin_s=None)

    def listen(ctx: TaskContext[Count]) -> Any:
        return ctx.wait_for_signal("never")

    async def listen_async(ctx: TaskContext[Count]) -> Any:
        return await ctx.wait_for_signal_async("never")

    flavour.task(app, listen, listen_async, state=Count)

    runtime = LocalRuntime(app, budget_s=900, backend="memory")
    set_visibility_timeout(runtime, 0)
    client = app.client()
    task_id = client.start("listen", {})
    runtime.invoke_once()
    assert runtime.record(task_id).status == Status.WAITING
    client.cancel(task_id, "stop")
    failed = fail_inbox_once(StoreFaults(app), "get")
    for _ in range(20):
        if runtime.invoke_once() is None:
            break
    assert failed
    assert failed[0].endswith("/inbox/cancel.json")
    assert runtime.record(task_id).status == Status.CANCELLED
