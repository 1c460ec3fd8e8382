"""Durable sleep: no user code runs while a task sleeps, and its deadline is journaled once.

The tests run in both flavours (``tests/waits/flavours.py``): the task ``def`` with
``ctx.sleep``, and ``async def`` with ``await ctx.sleep_async`` and awaited steps; the async
task's long sleep is an hour of hops, not a month. A warm worker's day of hops (the worker's
own memory, no task code) runs with the sync task.
"""

from __future__ import annotations

import time
from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.waits.flavours import Flavour


class Nap(BaseModel):
    days: float = 30.0
    woke_at: float | None = None


def sleepy_app(flavour: Flavour) -> tuple[Continuum, list[str]]:
    app = Continuum()
    ran: list[str] = []

    @flavour.step(app)
    def note(what: str) -> float:
        ran.append(what)
        return time.time()

    def nap(ctx: TaskContext[Nap]) -> float:
        note("before")
        ctx.sleep(timedelta(days=ctx.state.days))
        return note("after")

    async def nap_async(ctx: TaskContext[Nap]) -> float:
        await note("before")
        await ctx.sleep_async(timedelta(days=ctx.state.days))
        return await note("after")

    flavour.task(app, nap, nap_async, state=Nap)
    return app, ran


def test_a_long_sleep_is_a_chain_of_hops_that_run_no_user_code(make_runtime, flavour):
    app, ran = sleepy_app(flavour)
    runtime = make_runtime(app)
    # moto is slower per hop (make bench); a hop runs no task code, so the async task's chain
    # is an hour long (three hops) on both.
    days = 1 / 24 if flavour.is_async else 30 if runtime.backend == "memory" else 1
    summary = runtime.run("nap", {"days": days})
    record = runtime.record(summary.task_id)
    assert summary.status == "succeeded"
    assert ran == ["before", "after"]  # each step once, none while it slept
    assert record.counters.invocations == 2  # the claims: the start, and the wake
    assert record.counters.hops == days * 24 * 4 - 1  # one timer per 900 s, the last one wakes
    assert record.counters.waits == 1


def test_the_task_wakes_at_the_deadline_it_computed_when_the_sleep_was_first_reached(
    make_runtime, flavour
):
    app, _ = sleepy_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("nap", {"days": 1 / 24})  # an hour
        runtime.invoke_once()
        waiting = runtime.record(task_id)
        assert waiting.status == Status.WAITING
        deadline = waiting.journal[-1].deadline
        assert deadline is not None
        runtime.time.advance(1000)  # past the first hop
        runtime.invoke_once()
        assert runtime.record(task_id).journal[-1].deadline == deadline  # not recomputed
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert deadline <= summary.result < deadline + 5


def test_a_sleep_that_fits_in_the_invocation_is_slept_in_place(make_runtime, flavour):
    app, _ran = sleepy_app(flavour)
    runtime = make_runtime(app)
    summary = runtime.run("nap", {"days": 0.2 / 86400})  # 0.2 s
    record = runtime.record(summary.task_id)
    assert summary.status == "succeeded"
    assert record.counters.waits == 0
    assert record.counters.invocations == 1


def test_steps_after_a_sleep_run_once_across_budget_suspensions(make_runtime, flavour):
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)
    ran: list[int] = []

    @flavour.step(app)
    def work(i: int) -> int:
        ran.append(i)
        time.sleep(0.05)
        return i

    def nap_then_work(ctx: TaskContext[Nap]) -> list[int]:
        ctx.sleep(3600)
        return [work(i) for i in range(12)]

    async def nap_then_work_async(ctx: TaskContext[Nap]) -> list[int]:
        await ctx.sleep_async(3600)
        return [await work(i) for i in range(12)]

    flavour.task(app, nap_then_work, nap_then_work_async, state=Nap)

    runtime = make_runtime(app, budget_s=0.35)
    summary = runtime.run("nap_then_work", {})
    assert summary.status == "succeeded"
    assert summary.result == list(range(12))
    assert ran == list(range(12))  # every step once
    assert summary.continuations >= 2  # the steps after the wait spanned invocations


def test_a_negative_or_absurd_duration_fails_the_task_naming_the_call(make_runtime, flavour):
    app = Continuum()

    def bad(ctx: TaskContext[Nap]) -> None:
        ctx.sleep(ctx.state.days)

    async def bad_async(ctx: TaskContext[Nap]) -> None:
        await ctx.sleep_async(ctx.state.days)

    flavour.task(app, bad, bad_async, state=Nap)

    runtime = make_runtime(app)
    for days, shown in ((-1, "-1"), (1e12, "1000000000000")):
        summary = runtime.run("bad", {"days": days})
        assert summary.status == "failed"
        assert "ctx.sleep" in summary.error
        assert shown in summary.error


def test_a_warm_worker_hops_from_the_record_it_wrote_without_reading_it(make_runtime):
    """A hop remembers the record it wrote, so the next timer on the same worker skips the GET
    (its write's If-Match proves the record did not change)."""
    app, ran = sleepy_app(Flavour("sync"))
    runtime = make_runtime(app)
    summary = runtime.run("nap", {"days": 1})
    assert summary.status == "succeeded"
    assert ran == ["before", "after"]
    assert runtime.record(summary.task_id).counters.hops == 95
    # The first read, and none per hop: each hop and the wake claim from memory.
    assert summary.aws_calls["s3:GetObject"] == 1


def test_a_hop_from_a_remembered_record_that_changed_reads_it_and_hops_on(make_runtime, flavour):
    """Someone else wrote the record since this worker's hop: the remembered copy fails its
    If-Match, so the worker reads the record and hops from it; the chain is not dropped."""
    app, ran = sleepy_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        task_id = app.client().start("nap", {"days": 1 / 24})  # an hour: three hops
        runtime.invoke_once()  # the start: waiting
        runtime.time.advance(901)
        runtime.invoke_once()  # the first hop, remembered
        record, etag = app.records.load(task_id)
        record.forked_from = "another-writer"  # same generation, new etag
        app.records.swap(record, revision=etag)
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert ran == ["before", "after"]
    record = runtime.record(task_id)
    assert record.counters.hops == 3
    assert record.forked_from == "another-writer"  # the hops wrote on top of it


class Heavy(BaseModel):
    notes: str = "x" * 20_000  # over the inline limit: the state is a blob


def test_hops_from_memory_do_not_upload_a_blob_state_again(make_runtime, flavour):
    """A remembered record holds its values inline; its hops still write only the record
    (its blobs are known stored for the etag it remembers), and they are read back whole."""
    app = Continuum(inline_limit_bytes=1024)

    def heavy(ctx: TaskContext[Heavy]) -> int:
        ctx.sleep(timedelta(hours=2))  # seven hops
        return len(ctx.state.notes)

    async def heavy_async(ctx: TaskContext[Heavy]) -> int:
        await ctx.sleep_async(timedelta(hours=2))
        return len(ctx.state.notes)

    flavour.task(app, heavy, heavy_async, state=Heavy)

    runtime = make_runtime(app)
    summary = runtime.run("heavy", {})
    assert summary.status == "succeeded"
    assert summary.result == 20_000
    record = runtime.record(summary.task_id)
    assert record.counters.hops == 7
    assert record.state_ref is not None or record.state_segments  # stored as a blob
    puts = summary.aws_calls["s3:PutObject"]
    # Not 2 a hop (no blob upload): one each, and the start's, the wait's, the finish's
    # close of the inbox to cancels and the finish's, and the blob's.
    assert puts <= record.counters.hops + 7, summary.aws_calls
    assert summary.aws_calls["s3:GetObject"] <= 2  # the record and its blob, read once
