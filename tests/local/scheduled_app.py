"""A task that sleeps two hours while a schedule of the same app fires every hour."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum()


class Empty(BaseModel):
    pass


@app.step
def tick(i: int) -> int:
    return i + 1


@app.task(state=Empty)
def report(ctx: TaskContext[Empty]) -> int:
    return tick(1)


@app.task(state=Empty)
def long_nap(ctx: TaskContext[Empty]) -> int:
    ctx.sleep(timedelta(hours=2))
    return tick(2)


app.schedule("nightly", "report", every=timedelta(hours=1))
