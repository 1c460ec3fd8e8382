"""What a task wrote to ctx.state in the turn that ended it (or in a turn that waits) is not
in the record's state: `inspect` shows the state as it was when that turn began.

Run: python repro_final_state_misses_last_turn.py
"""

from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner

app = Continuum()


class S(BaseModel):
    prices: list[int] = []
    turns: int = 0


@app.step
def fetch() -> list[int]:
    return [100, 90]


@app.task(state=S)
def one_turn(ctx: TaskContext[S]) -> int:
    ctx.state.prices = fetch()
    return min(ctx.state.prices)


@app.task(state=S)
def two_turns(ctx: TaskContext[S]) -> int | None:
    ctx.state.turns += 1
    if ctx.state.turns < 2:
        return None
    ctx.state.prices = fetch()
    return min(ctx.state.prices)


@app.task(state=S)
def waits(ctx: TaskContext[S]) -> int:
    ctx.state.prices = fetch()
    ctx.sleep(timedelta(hours=1))
    return min(ctx.state.prices)


with TaskRunner(app) as runner:
    for name in ("one_turn", "two_turns", "waits"):
        task = runner.run(name, {})
        print(f"{name}: {task.status.value} {task.result}; saved state {task.record.state}")
