"""A wait reached inside a step (through ``current_context()``) fails the task at once, naming
the step and the wait: a step's journal entry is its result, so the wait could never replay."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import Continuum, TaskContext, current_context
from continuum.testing import TaskRunner


class Empty(BaseModel):
    pass


def waiting_steps_app() -> Continuum:
    app = Continuum()

    @app.step
    def naps() -> str:
        current_context().sleep(3600)
        return "rested"

    @app.step
    async def naps_async() -> str:
        await current_context().sleep_async(3600)
        return "rested"

    @app.step
    def listens() -> str:
        current_context().wait_for_signal("go")
        return "heard"

    @app.task(state=Empty)
    def sync_task(ctx: TaskContext[Empty]) -> str:
        return naps()

    @app.task(state=Empty)
    async def async_task(ctx: TaskContext[Empty]) -> str:
        return await naps_async()

    @app.task(state=Empty)
    def signal_task(ctx: TaskContext[Empty]) -> str:
        return listens()

    return app


@pytest.mark.parametrize(
    ("task_name", "step", "kind"),
    [
        ("sync_task", "naps", "sleep"),
        ("async_task", "naps_async", "sleep"),
        ("signal_task", "listens", "signal"),
    ],
)
def test_a_wait_inside_a_step_fails_the_task_at_once_naming_both(task_name, step, kind):
    with TaskRunner(waiting_steps_app()) as runner:
        task = runner.run(task_name, {})
        assert task.status == "failed"
        assert f"{kind} wait" in task.error.message, task.error
        assert f"inside step '{step}#0'" in task.error.message, task.error
        assert task.counters.invocations == 1  # no hour of waiting first
