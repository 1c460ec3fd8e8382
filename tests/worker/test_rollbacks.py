"""A rollback: workers of an older task version see records a newer one wrote.

They leave them untouched, whatever the message (a continuation, a wait's early timer), and
keep their message coming back for as long as the record is kept, so that rolling forward
resumes the task, however long the rollback lasted.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import deliver, share, snapshot_objects
from tests.support import LocalLambdaContext, LocalRuntime


class Nap(BaseModel):
    days: float = 2.0
    ticks: int = 0


def napping_app(*, version: int) -> Continuum:
    """Task ``nap``: two turns of one step, then a long sleep, then it returns."""
    app = Continuum()

    @app.step
    def tick(n: int) -> int:
        return n + 1

    @app.task(state=Nap, version=version, migrations={1: lambda s: s} if version > 1 else None)
    def nap(ctx: TaskContext[Nap]) -> int | None:
        ctx.state.ticks = tick(ctx.state.ticks)
        if ctx.state.ticks < 2:
            return None  # another turn: a plain continuation
        ctx.sleep(timedelta(days=ctx.state.days))
        return ctx.state.ticks

    return app


def _due(runtime: LocalRuntime) -> None:
    due = runtime.next_due()
    assert due is not None, "no message is left for the task"
    runtime.time.wait_until(due, poll_s=0)


def test_an_older_worker_does_not_hop_a_waiting_record_of_a_newer_task_version(aws):
    newer = napping_app(version=2)
    runtime = LocalRuntime(newer, budget_s=900, backend=aws, virtual_time=True)
    with runtime.time.running():
        task_id = newer.client().start("nap", {"days": 2})
        while runtime.record(task_id).status != Status.WAITING:
            assert runtime.invoke_once() is not None
        older = share(napping_app(version=1), runtime)
        before = snapshot_objects(runtime)
        _due(runtime)  # the first timer of the sleep comes, long before its deadline
        assert deliver(older, runtime, LocalLambdaContext(900)) is not None
        assert snapshot_objects(runtime) == before, "the older worker wrote the newer record"
        done = runtime.drive(task_id, stop_when_waiting=False)  # rolled forward
    assert done.status == "succeeded", done.error
    assert done.result == 2


def test_rolling_forward_after_a_rollback_longer_than_a_week_resumes_the_task():
    newer = napping_app(version=2)
    runtime = LocalRuntime(newer, budget_s=900, backend="memory", virtual_time=True)
    with runtime.time.running():
        task_id = newer.client().start("nap", {"days": 0})  # then the rollback
        older = share(napping_app(version=1), runtime)
        rollback_s = 9 * 24 * 3600.0
        started = runtime.time.now_s()
        deliveries = 0
        while runtime.time.now_s() - started < rollback_s:  # nine days on the older code
            _due(runtime)
            assert deliver(older, runtime, LocalLambdaContext(900)) is not None
            deliveries += 1
        assert runtime.record(task_id).status == Status.PENDING
        assert runtime.record(task_id).state_version == 2
        done: Any = runtime.drive(task_id, stop_when_waiting=False)  # rolled forward
    assert deliveries > 7 * 24 * 4
    assert done.status == "succeeded", done.error
    assert done.result == 2


def test_a_wait_of_a_kind_this_version_does_not_know_is_left_for_the_newer_code_naming_it(
    make_runtime, caplog
):
    app = Continuum()

    @app.task(state=Nap)
    def listen(ctx: TaskContext[Nap]) -> Any:
        signal = ctx.wait_for_signal("go")
        return signal.payload if signal else None

    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("listen", {})
        runtime.drive(task_id)
        record, revision = app.records.load(task_id)
        # what a newer continuum with a "webhook" kind of wait writes (same record format)
        record.waiting_for[0] = record.waiting_for[0].model_copy(update={"kind": "webhook"})
        app.records.swap(record, revision=revision)
        client.signal(task_id, "webhook.go", {"posted": True})  # the newer kind's answer
        before = snapshot_objects(runtime)
        assert runtime.invoke_once() is not None  # the wake, to a worker of this version
        assert snapshot_objects(runtime) == before, "the worker wrote a record it cannot read"
        assert runtime.next_due() is not None, "the wake was taken: the task is stranded"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(task_id in line and "'webhook'" in line for line in said), said
