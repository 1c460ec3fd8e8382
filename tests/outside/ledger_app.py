"""An app for the tests of the processes that run tasks: the worker, the dev server, run.

Each step takes real time and appends a line to a ledger file before it returns, so a test
sees, from outside every worker process, which steps really ran and how often. The journal is
saved after every step (``persist_every_s=0``), so a worker killed mid-task redoes at most the
step it was running; a dead worker's message comes back one second after its deadline.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel

from continuum import Continuum, TaskContext

app = Continuum(persist_every_s=0, visibility_margin_s=1)


class Count(BaseModel):
    """Count to ``n``, one step a turn, each step ``step_s`` seconds long."""

    n: int
    ledger: str
    step_s: float = 0.2
    done: list[int] = []


@app.step
def tick(ledger: str, task_id: str, i: int, seconds: float) -> int:
    time.sleep(seconds)
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(f"{task_id} {i} {os.getpid()}\n")
    return i


@app.task(state=Count)
def count(ctx: TaskContext[Count]) -> list[int] | None:
    state = ctx.state
    state.done.append(tick(state.ledger, ctx.task_id, len(state.done), state.step_s))
    return state.done if len(state.done) >= state.n else None


def ledger_lines(path: Path) -> list[tuple[str, int, int]]:
    """(task id, step index, pid) of each step run so far."""
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [(task, int(i), int(pid)) for task, i, pid in rows]
