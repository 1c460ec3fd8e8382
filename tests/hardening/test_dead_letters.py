"""The dead-letter queue never strands a task: after a dead letter is handled, the task either
has its current continuation again or is failed with a reason (DESIGN.md, "Guarantees").

Issue "Harden the core", case 3: the suspend write lands, every send of the next continuation
fails, the message goes to the dead-letter queue, and the handler, seeing a generation older
than the record's, acknowledges it as a leftover: the task is suspended with no message.
"""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import ScriptedContext, drain, sends_refused, sqs_event
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
