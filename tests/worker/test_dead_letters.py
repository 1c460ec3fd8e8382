"""The dead-letter queue never strands a task: after a dead letter is handled, the task either
has its current continuation again or is failed with a reason, as the guarantees promise.

The case once stranded: the suspend write lands, every send of the next continuation
fails, the message goes to the dead-letter queue, and the handler, seeing a generation older
than the record's, acknowledges it as a leftover: the task is suspended with no message.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, drain, sends_refused, snapshot_objects, sqs_event
from tests.support import LocalRuntime

MAX_RECEIVE_COUNT = 5  # the template's redrive policy


class Job(BaseModel):
    done: list[int] = []


def job_app() -> tuple[Continuum, list[int]]:
    app = Continuum()
    ticks: list[int] = []

    @app.step
    def tick(i: int) -> int:
        ticks.append(i)
        return i

    @app.task(state=Job)
    def job(ctx: TaskContext[Job]) -> list[int] | None:
        ctx.state.done.append(tick(len(ctx.state.done)))
        return ctx.state.done if len(ctx.state.done) >= 3 else None

    return app, ticks


def test_a_dead_letter_whose_next_continuation_was_never_sent_does_not_strand_the_task(aws):
    app, ticks = job_app()
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="unsent")
    start = runtime.source.receive()[0]
    body, message_id, receipt = start.body, start.message_id, start.receipt_handle

    # From here on every SendMessage of the worker fails (an SQS outage, a broken policy).
    with sends_refused(runtime):
        for receive in range(1, MAX_RECEIVE_COUNT + 1):
            event = sqs_event(body, message_ids=[message_id], receipt=receipt)
            event["Records"][0]["attributes"]["ApproximateReceiveCount"] = str(receive)
            app.handler(event, ScriptedContext(1, executed=lambda: len(ticks)))
            if receive == 1:
                # The suspend write landed; the send of generation 1's continuation did not.
                record = runtime.record(task_id)
                assert (record.status, record.generation) == (Status.SUSPENDED, 1)
                assert ticks == [0]

        # SQS moves the message to the dead-letter queue; the outage is over by the time
        # the dead-letter handler runs.
        runtime.source.delete(receipt)
    dead = sqs_event(body, message_ids=[message_id])
    dead["Records"][0]["attributes"]["ApproximateReceiveCount"] = str(MAX_RECEIVE_COUNT)
    app.dead_letter_handler(dead, ScriptedContext(None, executed=lambda: len(ticks)))

    status = app.client().status(task_id)
    if status.status == Status.FAILED:
        assert status.error is not None
        assert status.error.message
        return
    # Not failed: then its current continuation must be in the queue again.
    record = drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: len(ticks)))
    assert record.status == Status.SUCCEEDED
    assert app.client().result(task_id) == [0, 1, 2]
    assert ticks == [0, 1, 2]


class WorkerDied(BaseException):
    """Stands for SIGKILL: no ``except Exception`` in the library catches it."""


def test_a_dead_letter_of_the_message_a_dead_worker_still_leases_comes_back_until_its_lease_ends(
    aws,
):
    app = Continuum()
    ticks: list[int] = []

    @app.step
    def tick(i: int) -> int:
        if not ticks:
            ticks.append(-1)
            raise WorkerDied  # the worker that claimed the start dies inside its first step
        ticks.append(i)
        return i

    @app.task(state=Job)
    def job(ctx: TaskContext[Job]) -> list[int] | None:
        ctx.state.done.append(tick(len(ctx.state.done)))
        return ctx.state.done if len(ctx.state.done) >= 3 else None

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="leased")
    start = runtime.source.receive()[0]
    event = sqs_event(start.body, message_ids=[start.message_id], receipt=start.receipt_handle)
    with pytest.raises(WorkerDied):
        app.handler(event, ScriptedContext(None, executed=lambda: len(ticks)))
    leased = runtime.record(task_id)
    assert leased.status == Status.RUNNING
    assert leased.lease is not None

    # Its message reached the dead-letter queue (its receive count ran out) while the dead
    # worker's lease still runs: the handler cannot tell a dead worker from a slow one, so the
    # dead letter stays in its queue, to be decided after the lease.
    dead = sqs_event(start.body, message_ids=[start.message_id])
    dead["Records"][0]["attributes"]["ApproximateReceiveCount"] = str(MAX_RECEIVE_COUNT)
    before = snapshot_objects(runtime)
    kept = app.dead_letter_handler(dead, ScriptedContext(None, executed=lambda: len(ticks)))
    assert kept["batchItemFailures"] == [{"itemIdentifier": start.message_id}]
    assert snapshot_objects(runtime) == before

    # Back after the lease ended: the task is failed naming why, never left running.
    with freeze_time(leased.lease.expires_at + timedelta(seconds=1), tick=True):
        done = app.dead_letter_handler(dead, ScriptedContext(None, executed=lambda: len(ticks)))
    assert done["batchItemFailures"] == []
    status = app.client().status(task_id)
    assert status.status == Status.FAILED
    assert status.error is not None
    assert status.error.type == "DeadLettered"
