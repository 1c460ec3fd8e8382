"""The chaos run's link answers: POSTs racing on one callback take one answer; a race past
the timeout takes none; the check flags a race that took two."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from chaos import links
from chaos.checks import Report
from continuum import Continuum, Status, TaskContext


class Ask(BaseModel):
    pass


def waiting(make_runtime: Any, timeout: float) -> tuple[Any, Continuum, str]:
    app = Continuum()

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> Any:
        return ctx.create_callback("answer", timeout=timeout).result()

    runtime = make_runtime(app)
    task = runtime.run("ask", {})
    [waiter] = app.client().status(task.task_id).waiting_for
    return runtime, app, waiter.id


def test_racing_posts_take_one_answer_and_the_task_keeps_it(make_runtime):
    runtime, app, callback_id = waiting(make_runtime, 600)
    with runtime.time.running():
        raced = links.answer(app.client(), callback_id, {"n": 0})
        again = links.answer(app.client(), callback_id, {"n": 1})
        done = runtime.drive(callback_id.rpartition(".")[0])
    assert raced["outcome"] == "ok"
    assert raced["taken"] == 1
    assert sorted(raced["statuses"]) == [200, 409, 409]
    assert again["outcome"] == "answered"
    assert done.status == Status.SUCCEEDED
    assert done.result == {"n": 0}


def test_a_race_past_the_timeout_takes_nothing(make_runtime):
    runtime, app, callback_id = waiting(make_runtime, 5)
    with runtime.time.running():
        runtime.time.advance(6)
        raced = links.answer(app.client(), callback_id, {"n": 0})
        done = runtime.drive(callback_id.rpartition(".")[0], stop_when_waiting=False)
    assert raced["outcome"] == "closed"
    assert done.status == Status.FAILED


def test_a_race_that_took_two_answers_is_a_violation():
    report = Report()
    log = [{"task_id": "t", "link": {"taken": 2, "statuses": [200, 200, 409]}}]
    links.check_links(report, log)
    assert report.violations[links.TWO_TAKEN] == 1
