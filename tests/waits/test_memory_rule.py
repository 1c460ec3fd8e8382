"""A warm worker's remembered record is trusted only when a conditional write follows it.

The warm and cold hops run in both flavours (``tests/waits/flavours.py``): the task ``def``
with ``ctx.sleep``, and ``async def`` with ``await ctx.sleep_async``. The mixed deploy runs its
two sync versions.
"""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.support import forget_remembered


class Nap(BaseModel):
    seconds: float = 1000.0


def test_a_message_left_for_a_newer_worker_that_finished_the_task_is_acknowledged(make_runtime):
    """The old worker leaves a newer deploy's waiting record untouched (no hop) and sends its
    timer again. The newer worker then finishes the task. The old worker's next delivery of
    the timer reads the store (finished: acknowledged), and leaves no message behind."""
    new = Continuum()

    @new.task(state=Nap, name="nap", version=2, migrations={1: lambda s: s})
    def nap_new(ctx: TaskContext[Nap]) -> str:
        ctx.sleep(ctx.state.seconds)
        return "new"

    old = Continuum()

    @old.task(state=Nap, name="nap")
    def nap_old(ctx: TaskContext[Nap]) -> str:
        ctx.sleep(ctx.state.seconds)
        return "old"

    runtime = make_runtime(new)
    with runtime.time.running():
        task_id = new.client().start("nap", {})
        runtime.invoke_once()  # new: waiting; its timer comes in 900 s, before the deadline
        runtime.app = old  # a mixed deploy: an old worker is still warm
        old.configure(store=new.records.store, queue=new.continuations.queue)
        runtime.time.advance(901)
        runtime.invoke_once()  # old: an early timer, left for a newer worker and sent again
        assert runtime.record(task_id).counters.hops == 0
        assert runtime.record(task_id).generation == 1
        runtime.app = new
        new.client().cancel(task_id)
        runtime.invoke_once()  # new: the cancel's wake finishes the task
        assert runtime.record(task_id).status == Status.CANCELLED
        runtime.app = old
        runtime.time.advance(901)
        # Old: the timer it sent again. The store says finished: acknowledged, nothing sent.
        assert runtime.invoke_once() is not None
        runtime.time.advance(901)
        assert runtime.invoke_once() is None  # no message "left for a newer worker"


def _hop_four_timers(runtime, app, *, warm: bool):
    with runtime.time.running():
        task_id = app.client().start("nap", {"seconds": 3600.0})
        runtime.invoke_once()  # waiting
        for _ in range(4):  # three hops, then the wake
            if not warm:
                forget_remembered(app)  # a fresh environment remembers nothing
            runtime.time.advance(901)
            runtime.invoke_once()
    return runtime.record(task_id)


def test_a_warm_hop_writes_the_record_a_cold_hop_would(make_runtime, flavour):
    """The remembered record must be the stored version its etag names: a hop from memory
    then writes exactly what a hop from the store would."""
    records = []
    for warm in (True, False):
        app = Continuum()

        def nap(ctx: TaskContext[Nap]) -> str:
            ctx.sleep(ctx.state.seconds)
            return "done"

        async def nap_async(ctx: TaskContext[Nap]) -> str:
            await ctx.sleep_async(ctx.state.seconds)
            return "done"

        flavour.task(app, nap, nap_async, state=Nap)

        records.append(_hop_four_timers(make_runtime(app), app, warm=warm))
    warm_record, cold_record = records
    assert (warm_record.status, cold_record.status) == (Status.SUCCEEDED, Status.SUCCEEDED)
    assert warm_record.counters.hops == cold_record.counters.hops == 3
    assert warm_record.counters.saves == cold_record.counters.saves
    assert warm_record.save_stats.count == cold_record.save_stats.count
