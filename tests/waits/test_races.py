"""No lost wake-up: a signal or an answer that arrives anywhere around "the task goes waiting".

The worker writes the record ``waiting`` (W1), then lists the inbox (W2), then sends its timer
(W3). A sender writes its object (S1), then reads the record (S2), then wakes the generation it
read (S3), and a worker receives that wake at once (S4: while the task still runs, the wake
is a duplicate and is acknowledged). Every interleaving of the two sequences is run: whatever
the order, the task takes what was sent, once, without waiting for a timer. And when a wake and
a timeout arrive together, exactly one wins.

Every test runs in both flavours (``tests/waits/flavours.py``): the task ``def``, and
``async def`` with ``await ctx.wait_for_signal_async``, ``cb.result()`` and awaited steps.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import CallbackTimeoutError, Continuum, Signal, Status, TaskContext
from tests.support import CallbackAnswer, LocalRuntime, utcnow
from tests.waits.flavours import Flavour

#: Where each sender step runs: before worker step W1, W2 or W3, or after all of them.
POSITIONS = ("before W1", "before W2", "before W3", "after W3")
INTERLEAVINGS = [p for p in itertools.product(range(4), repeat=4) if p[0] <= p[1] <= p[2] <= p[3]]


class Wanting(BaseModel):
    pass


def racing_app(flavour: Flavour) -> tuple[Continuum, dict[str, Any]]:
    app = Continuum()
    seen: dict[str, Any] = {"armed": False, "handled": [], "ids": []}

    @flavour.step(app)
    def arm() -> None:
        seen["armed"] = True  # from here on, the worker's next record write is W1

    @flavour.step(app)
    def handle(value: Any) -> Any:
        seen["handled"].append(value)
        return value

    def wants_signal(ctx: TaskContext[Wanting]) -> Any:
        arm()
        signal = ctx.wait_for_signal("go", timeout=3600)
        return handle(signal.payload if signal else "timed out")

    async def wants_signal_async(ctx: TaskContext[Wanting]) -> Any:
        await arm()
        signal = await ctx.wait_for_signal_async("go", timeout=3600)
        return await handle(signal.payload if signal else "timed out")

    def wants_answer(ctx: TaskContext[Wanting]) -> Any:
        callback = ctx.create_callback("answer", timeout=3600)
        seen["ids"].append(callback.id)
        arm()
        try:
            return handle(callback.result())
        except CallbackTimeoutError:
            return handle("timed out")

    async def wants_answer_async(ctx: TaskContext[Wanting]) -> Any:
        callback = ctx.create_callback("answer", timeout=3600)
        seen["ids"].append(callback.id)
        await arm()
        try:
            return await handle(callback.result())
        except CallbackTimeoutError:
            return await handle("timed out")

    flavour.task(app, wants_signal, wants_signal_async, state=Wanting)
    flavour.task(app, wants_answer, wants_answer_async, state=Wanting)
    return app, seen


def sender_steps(runtime: LocalRuntime, kind: str, task_id: str, seen: dict[str, Any]):
    """The sender's steps, as ``client.signal`` / ``complete_callback`` make them, and the
    delivery of its wake."""
    app = runtime.app
    read: dict[str, int] = {}

    def write_object() -> None:
        if kind == "signal":
            app.records.inbox.put_signal(task_id, Signal(id="s-1", name="go", payload="sent"))
        else:
            token = seen["ids"][0].rsplit(".", 1)[1]
            app.records.inbox.put_answer(
                task_id, token, CallbackAnswer(ok=True, result="sent", answered_at=utcnow())
            )

    def read_record() -> None:
        read["generation"] = app.records.load(task_id)[0].generation

    def wake() -> None:
        app.continuations.send(task_id, generation=read["generation"], reason="wake", kind="wake")

    def deliver() -> None:
        runtime.invoke_once()

    return [write_object, read_record, wake, deliver]


def worker_step(operation: str, key: str) -> bool:
    """Whether a store or queue operation is one of W1 (the waiting write), W2, W3."""
    return (
        (operation == "put" and key.endswith("/record.json"))
        or (operation == "list" and "/inbox/" in key)
        or operation == "send"
    )


@pytest.mark.parametrize("kind", ["signal", "answer"])
@pytest.mark.parametrize("where", INTERLEAVINGS, ids=lambda p: "-".join(map(str, p)))
def test_what_arrives_around_the_waiting_write_is_never_lost(kind, where, flavour):
    app, seen = racing_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    with runtime.time.running():
        task_id = app.client().start(f"wants_{kind}", {})
        steps = sender_steps(runtime, kind, task_id, seen)
        pending = sorted(zip(where, steps, strict=True), key=lambda item: item[0])
        counted = {"n": 0}
        counting = threading.local()

        def interleave(operation: str, key: str) -> None:
            if getattr(counting, "inside", False) or not seen["armed"]:
                return
            if not worker_step(operation, key) or counted["n"] >= 3:
                return
            counting.inside = True  # the sender's own calls are not worker steps
            try:
                while pending and pending[0][0] <= counted["n"]:
                    pending.pop(0)[1]()
            finally:
                counting.inside = False
            counted["n"] += 1

        chain(runtime.store, interleave)
        chain(runtime.queue, interleave)
        runtime.invoke_once()  # the start: the task arms itself and goes waiting
        assert counted["n"] == 3  # W1, W2 and W3 all happened
        for _, step in pending:  # what is left runs after W3
            step()
        # Without a lost wake-up the task runs on at once: not at its next timer hop, not at
        # its timeout (drive stops when only those are left).
        done = runtime.drive(task_id)
    assert done.status == "succeeded"
    assert done.result == "sent"
    assert runtime.record(task_id).counters.hops == 0
    assert seen["handled"] == ["sent"]  # taken once


def chain(fake: Any, hook: Callable[[str, str], None]) -> None:
    before = fake.on_call

    def both(operation: str, key: str) -> None:
        hook(operation, key)
        if before is not None:
            before(operation, key)

    fake.on_call = both


@pytest.mark.parametrize("together", ["one batch", "two workers at once"])
def test_a_wake_and_a_timeout_that_arrive_together_let_exactly_one_win(together, flavour):
    app, seen = racing_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True, batch_size=2)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("wants_answer", {})
        runtime.invoke_once()
        assert runtime.record(task_id).status == Status.WAITING
        runtime.time.advance(3600)  # the timeout is due ...
        client.complete_callback(seen["ids"][0], "sent")  # ... and the answer arrives
        runtime.drive(task_id, stop_when_waiting=False) if together == "one batch" else None
        if together == "two workers at once":
            runtime.batch_size = 1
            workers = [threading.Thread(target=runtime.invoke_once) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            runtime.drive(task_id, stop_when_waiting=False)
        record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED
    assert record.result in ("sent", "timed out")
    assert len(seen["handled"]) == 1  # one winner: the step after the wait ran once


def test_a_wake_whose_claim_loses_to_a_timer_hop_looks_again_and_runs_the_task(flavour):
    app, _ = racing_app(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend="memory", virtual_time=True)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("wants_signal", {})
        runtime.invoke_once()  # waiting for "go", a timer at its deadline
        records = runtime.observer
        hopped = {"done": False}

        def hop_first(operation: str, key: str) -> None:
            # Just before the wake's worker claims the record, a timer hop moves it on a
            # generation (as a concurrent worker would), without looking at the inbox.
            if operation == "put" and key.endswith("/record.json") and not hopped["done"]:
                hopped["done"] = True
                record, etag = records.load(task_id)
                record.generation += 1
                records.swap(record, revision=etag)

        chain(runtime.store, hop_first)
        client.signal(task_id, "go", "sent")  # its wake names the generation before the hop
        done = runtime.drive(task_id)  # stops if only the timer is left
    assert hopped["done"]
    assert done.status == "succeeded"
    assert done.result == "sent"
