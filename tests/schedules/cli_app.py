"""An app with two schedules, for the ``continuum schedules`` commands (``--app``)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum()


class Digest(BaseModel):
    channel: str


@app.task(state=Digest)
def digest(ctx: TaskContext[Digest]) -> str:
    return ctx.state.channel


app.schedule("morning", digest, cron="cron(0 9 * * ? *)", input={"channel": "news"},
             timezone="Europe/Paris")  # fmt: skip
app.schedule("tick", digest, every=timedelta(minutes=30), input={"channel": "ops"})
