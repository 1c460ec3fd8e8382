"""A task of three turns with an hour's sleep in its second: a local run hops its timer."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum()


class Count(BaseModel):
    n: int = 0


@app.step
def work(i: int) -> int:
    return i


@app.task(state=Count)
def three_turns(ctx: TaskContext[Count]) -> str | None:
    ctx.state.n = work(ctx.state.n) + 1
    if ctx.state.n == 2:
        ctx.sleep(timedelta(hours=1))
    return "done" if ctx.state.n >= 3 else None
