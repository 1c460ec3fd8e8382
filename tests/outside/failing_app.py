"""An app whose step raises from inside a helper, for the tests that show where it raised."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum()


class Pages(BaseModel):
    page: int = 3


def parse_title(html: str, page: int) -> str:
    if "<title>" not in html:
        raise ValueError(f"no title on page {page}")
    return html


@app.step
def fetch_title(page: int) -> str:
    return parse_title("<html></html>", page)


@app.task(state=Pages)
def titles(ctx: TaskContext[Pages]) -> str:
    return fetch_title(ctx.state.page)


@app.task(state=Pages)
def broken(ctx: TaskContext[Pages]) -> str:
    return {"page": ctx.state.page}["title"]
