"""The app of ``continuum ui``'s test: a review whose child task waits for an approval, and a
task that fails."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum()


class Ask(BaseModel):
    what: str = "ship v2"


@app.task(state=Ask)
def needs_approval(ctx: TaskContext[Ask]) -> Any:
    cb = ctx.create_callback("approval", timeout=3600, request={"title": ctx.state.what})
    return cb.result()


@app.task(state=Ask)
def breaks(ctx: TaskContext[Ask]) -> Any:
    raise RuntimeError("the disk is full")


@app.task(state=Ask)
def review(ctx: TaskContext[Ask]) -> Any:
    return ctx.invoke("needs_approval", {"what": ctx.state.what}, name="approval")
