"""A small deterministic task for the functional tests, counting its real step calls.

``build("async")`` gives its async twin: the same steps, as ``async def``, with a turn's first
two steps gathered (``asyncio.gather``); they make the same calls with the same arguments, so
both flavours give the same result and the same counts.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from pydantic import BaseModel

from continuum import Continuum, TaskContext

TURNS = 4
STEPS_PER_TURN = 3
TOTAL_STEPS = TURNS * STEPS_PER_TURN


class Tally(BaseModel):
    label: str
    n: int = 0
    total: int = 0
    log: list[str] = []


def build(flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    """A fresh app with one task, ``tally``, and the counter of its real step calls."""
    app = Continuum()
    calls: Counter[str] = Counter()

    def finish(ctx: TaskContext[Tally], a: int, b: int, c: int) -> dict[str, object] | None:
        s = ctx.state
        s.total += a + b + c
        s.log.append(f"turn {ctx.turn}: {a} {b} {c}")
        s.n += 1
        if s.n >= TURNS:
            return {"total": s.total, "log": s.log}
        return None

    if flavour == "sync":

        @app.step
        def double(label: str, turn: int, x: int) -> int:
            calls[f"double:{label}:{turn}:{x}"] += 1
            return 2 * x

        @app.step
        def square(label: str, turn: int, x: int) -> int:
            calls[f"square:{label}:{turn}:{x}"] += 1
            return x * x

        @app.task(state=Tally)
        def tally(ctx: TaskContext[Tally]) -> dict[str, object] | None:
            s = ctx.state
            a = double(s.label, ctx.turn, s.n)
            b = ctx.step(square, s.label, ctx.turn, a)
            c = double(
                s.label, ctx.turn, b + 1
            )  # the same step twice in a turn: keys differ by ordinal
            return finish(ctx, a, b, c)

    else:

        @app.step
        async def double(label: str, turn: int, x: int) -> int:
            calls[f"double:{label}:{turn}:{x}"] += 1
            return 2 * x

        @app.step
        async def square(label: str, turn: int, x: int) -> int:
            calls[f"square:{label}:{turn}:{x}"] += 1
            return x * x

        @app.task(state=Tally)
        async def tally(ctx: TaskContext[Tally]) -> dict[str, object] | None:
            s = ctx.state
            # square's argument is double's result, known beforehand: the two run gathered.
            a, b = await asyncio.gather(
                double(s.label, ctx.turn, s.n), ctx.step_async(square, s.label, ctx.turn, 2 * s.n)
            )
            c = await double(s.label, ctx.turn, b + 1)
            return finish(ctx, a, b, c)

    return app, calls
