"""The record's state is the snapshot its current turn started from (with that turn's journal,
the point a replay or a fork starts from): what a person reads says which turn's it is."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.cli.steer import render
from continuum.testing import TaskRunner
from tests.support import inspect_task


class Prices(BaseModel):
    prices: list[int] = []
    turns: int = 0


def app_of_two_turns() -> Continuum:
    app = Continuum()

    @app.step
    def fetch() -> list[int]:
        return [100, 90]

    @app.task(state=Prices)
    def two_turns(ctx: TaskContext[Prices]) -> int | None:
        ctx.state.turns += 1
        if ctx.state.turns < 2:
            return None
        ctx.state.prices = fetch()
        return min(ctx.state.prices)

    return app


def test_a_finished_tasks_state_is_the_one_its_last_turn_began_with_and_inspect_says_so():
    with TaskRunner(app_of_two_turns()) as runner:
        task = runner.run("two_turns", {})
        assert (task.result, task.record.turn) == (90, 1)
        assert task.record.state == {"prices": [], "turns": 1}  # the last turn's start
        text = render(inspect_task(runner.runtime.observer, task.task_id))
    assert "state (the snapshot turn 1 began with):" in text
