"""A finished task's status says how it ended, not why it last waited: the reason of its last
suspension or wait is gone once it has succeeded, failed or been cancelled."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, TaskContext


class Nap(BaseModel):
    pass


def napping_app() -> Continuum:
    app = Continuum()

    @app.task(state=Nap)
    def nap(ctx: TaskContext[Nap]) -> str:
        ctx.sleep(60, name="nap")
        return "done"

    return app


def test_a_task_that_slept_and_succeeded_reports_no_reason_to_wait(make_runtime):
    app = napping_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        done = runtime.run("nap", {})
    status = app.client().status(done.task_id)
    assert status.status.value == "succeeded"
    assert status.suspend_reason is None


def test_a_task_cancelled_while_asleep_reports_no_reason_to_wait(make_runtime):
    app = napping_app()
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("nap", {})
        runtime.invoke_once()
        assert client.status(task_id).suspend_reason  # asleep: it says until when
        client.cancel(task_id, "not needed")
        runtime.drive(task_id)
    status = client.status(task_id)
    assert status.status.value == "cancelled"
    assert status.suspend_reason is None
