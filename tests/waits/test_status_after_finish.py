"""A finished task's status says how it ended, not why it last waited: the reason of its last
suspension or wait is gone once it has succeeded, failed or been cancelled, and so is every
callback it left open (status, inspect and the test's handles list none)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import CallbackError, Continuum, TaskContext
from continuum._ops.inspection import inspect_task
from continuum.testing import TaskRunner


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


# -- a finished task waits for nothing: no open callback, no link ----------------------------------


class Order(BaseModel):
    ending: str = "wait"


def ordering_app() -> Continuum:
    app = Continuum(signing_key="a-test-key", callback_url="https://links.example.test")

    @app.task(state=Order)
    def order(ctx: TaskContext[Order]) -> str:
        cb = ctx.create_callback("approval", timeout=timedelta(days=2), request={"title": "Buy?"})
        if ctx.state.ending == "succeed":
            return "left the callback open"
        if ctx.state.ending == "fail":
            raise ValueError("no stock")
        return "bought" if cb.result()["approved"] else "not bought"

    return app


def open_waits(runner: TaskRunner, task_id: str) -> dict[str, list[Any]]:
    """What each view of the task lists as open: status, inspect, and the test's handle."""
    client = runner.client
    view = inspect_task(client.records, task_id, versions=0, links=client.settings.links())
    return {
        "status": client.status(task_id).waiting_for,
        "inspect": view.waiting_for,
        "handle": runner.handle(task_id).waiting_for,
    }


NOTHING_OPEN: dict[str, list[Any]] = {"status": [], "inspect": [], "handle": []}


def test_a_task_cancelled_while_it_waits_for_a_callback_lists_no_open_callback(backend):
    with TaskRunner(ordering_app(), backend=backend) as runner:  # type: ignore[arg-type]
        task = runner.run("order", {})
        assert [w.url is not None for w in task.waiting_for] == [True]  # open, with its link
        task.cancel("changed my mind")
        assert task.status == "cancelled"
        assert open_waits(runner, task.task_id) == NOTHING_OPEN
        # The record still knows the callback: an answer is told the task has ended.
        with pytest.raises(CallbackError, match="is cancelled"):
            runner.client.complete_callback(callback_id(runner, task.task_id), {"approved": True})


@pytest.mark.parametrize(("ending", "status"), [("succeed", "succeeded"), ("fail", "failed")])
def test_a_task_that_ended_with_a_callback_it_never_waited_for_lists_none_open(
    backend, ending, status
):
    with TaskRunner(ordering_app(), backend=backend) as runner:  # type: ignore[arg-type]
        task = runner.run("order", {"ending": ending})
        assert task.status == status
        assert open_waits(runner, task.task_id) == NOTHING_OPEN


def callback_id(runner: TaskRunner, task_id: str) -> str:
    (token,) = runner.client.records.load(task_id)[0].callbacks
    return f"{task_id}.{token}"
