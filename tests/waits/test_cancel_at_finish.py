"""A cancel that comes during a task's last turn: accepted means cancelled, refused means not.

The finish closes the task to cancel requests in its inbox before it writes the ending; the
client's request and that close are created with If-None-Match on one key, so whichever lands
first decides, and ``client.cancel``'s answer says which.

The cancel during the last turn's step runs in both flavours (``tests/waits/flavours.py``): the
task ``def``, and ``async def`` awaiting that step. The other tests are about the finish's
writes, after the task function returned: they run with a sync task.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, TaskContext, TaskFinishedError
from tests.conftest import StoreFaults
from tests.waits.flavours import Flavour


class Last(BaseModel):
    pass


def last_turn_app(flavour: Flavour) -> tuple[Continuum, dict[str, Any]]:
    """Task ``last``: one step, inside which the outside world cancels it, then it returns
    (no step or wait after it, where the cancel would be raised)."""
    app = Continuum()
    seen: dict[str, Any] = {"answers": []}

    @flavour.step(app)
    def work() -> str:
        task_id = seen["task_id"]
        try:
            app.client().cancel(task_id, "changed my mind")
        except TaskFinishedError as exc:
            seen["answers"].append(f"refused: {exc.message}")
        else:
            seen["answers"].append("accepted")
        return "worked"

    def last(ctx: TaskContext[Last]) -> str:
        work()
        return "done"

    async def last_async(ctx: TaskContext[Last]) -> str:
        await work()
        return "done"

    flavour.task(app, last, last_async, state=Last)
    return app, seen


def test_a_cancel_accepted_during_the_last_turn_ends_the_task_cancelled(make_runtime, flavour):
    app, seen = last_turn_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        seen["task_id"] = task_id = client.start("last", {})
        done = runtime.drive(task_id)
    assert seen["answers"] == ["accepted"]
    assert done.status == "cancelled", "a cancel accepted was not what happened"
    assert "changed my mind" in (done.error or "")


def test_a_cancel_after_the_finish_closed_the_task_is_refused_and_it_succeeds(make_runtime):
    app = Continuum()

    @app.task(state=Last)
    def quick(ctx: TaskContext[Last]) -> str:
        return "done"

    runtime = make_runtime(app)
    client = app.client()
    answers: list[str] = []
    faults = StoreFaults(app)

    def cancel_then_finish(write: Any) -> str:
        # Between the finish's close of the inbox and its record write, someone cancels.
        try:
            client.cancel(task_id, "too late")
        except TaskFinishedError as exc:
            answers.append(exc.message)
        return str(write())

    faults.on_finish_write(cancel_then_finish)
    with runtime.time.running():
        task_id = client.start("quick", {})
        done = runtime.drive(task_id)
    assert done.status == "succeeded"
    assert len(answers) == 1
    assert "finishing" in answers[0]


def test_a_worker_killed_between_the_close_and_the_finish_write_finishes_the_task(
    make_runtime,
):
    app = Continuum()

    @app.task(state=Last)
    def quick(ctx: TaskContext[Last]) -> str:
        return "done"

    runtime = make_runtime(app)
    client = app.client()
    faults = StoreFaults(app)
    killed: list[bool] = []

    def die_once(write: Any) -> str:
        if not killed:
            killed.append(True)
            raise RuntimeError("the worker died before its finish write")
        return str(write())

    faults.on_finish_write(die_once)
    with runtime.time.running():
        task_id = client.start("quick", {})
        assert runtime.invoke_once()["batchItemFailures"], "the worker did not die"
        with pytest.raises(TaskFinishedError, match="finishing"):
            client.cancel(task_id, "meanwhile")
        done = runtime.drive(task_id, stop_when_waiting=False)
    assert done.status == "succeeded", done.error
    assert done.result == "done"
