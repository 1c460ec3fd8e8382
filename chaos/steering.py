"""The chaos tasks an operator steers: failed parents, children and batch items, retried.

A ``mend`` step fails the first time it really runs under its idempotency key (the ledger
says so: ``chaos.base``) and succeeds when it runs again, as a step does after its fix is
deployed. The harness's outside world (``chaos.outside``) retries what failed with
``client.retry``, through its faulty client, until the task succeeds. Every result is a pure
function of the input: a retry changes how a task got there, never what it ends with.

Tasks:
    mending: ``ctx.map_tasks`` over ``mendable`` children, some of them flaky; the batch's
        ``values()`` fails the parent until every child succeeded. The harness retries the
        parent (which retries its failed children first), or (``mode="children"``) the
        failed children it sees, then the parent.
    mendable: a child of one ``leaf_work`` step and, when flaky, a ``mend`` step.
    mapmend: ``ctx.map`` over items, some flaky; a retry runs the failed items again and
        replays the others.
    forkfan: ``ctx.map_tasks`` over ``leaf`` children of two turns each, so that it waits
        for them; the harness forks it (``{task_id}-fork``, a task of the plan) when it sees
        it waiting, or once it ended. The fork must end with the same result, from children
        of its own where the batch had not finished at its checkpoint.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from pydantic import BaseModel

from chaos.base import LEDGER_ENV, app, duration_s, idempotency_key, work
from chaos.flows import (
    combine,
    combine_value,
    leaf_input,
    leaf_result,
    leaf_value,
    leaf_work,
    piece,
    piece_value,
    refine,
    refine_value,
)
from continuum import TaskContext

#: The kinds of this module, and the share of a run's tasks each takes.
SHARES = {"mending": 0.03, "mapmend": 0.03, "forkfan": 0.03}
#: How a fork's task id derives from its original's (the plan holds both).
FORK_SUFFIX = "-fork"
#: How a mending task's failures are retried.
MODES = ("parent", "children")
#: What a mend step's first execution raises.
MEND_FAILED = "MendFailed"


class MendFailedError(Exception):
    """A ``mend`` step's first execution (the bug its retry's fix removed)."""


def _runs_so_far(key: str) -> int:
    path = os.environ.get(LEDGER_ENV)
    if not path or not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(json.loads(line).get("key") == key for line in f if line.strip())


@app.step
def mend(salt: int, i: int) -> int:
    work("mend", duration_s(5, 20, "mend", salt, i))
    if _runs_so_far(idempotency_key()) <= 1:
        raise MendFailedError(f"mend {i} fails at its first execution")
    return 0


class Mendable(BaseModel):
    salt: int
    i: int
    flaky: bool = False


@app.task(state=Mendable)
def mendable(ctx: TaskContext[Mendable]) -> dict[str, Any]:
    s = ctx.state
    value = leaf_work(s.salt, s.i, 0)
    if s.flaky:
        value += mend(s.salt, s.i)
    return {"i": s.i, "value": value}


class Mending(BaseModel):
    salt: int
    children: int
    limit: int
    flaky: list[int] = []
    mode: str = "parent"


@app.task(state=Mending)
def mending(ctx: TaskContext[Mending]) -> dict[str, Any]:
    s = ctx.state
    inputs = [{"salt": s.salt, "i": i, "flaky": i in s.flaky} for i in range(s.children)]
    batch = ctx.map_tasks("mendable", inputs, name="mends", max_concurrency=s.limit)
    values = [result["value"] for result in batch.values()]
    return {"values": values, "total": combine(s.salt, values)}


class MapMend(BaseModel):
    salt: int
    items: int
    limit: int
    flaky: list[int] = []


@app.task(state=MapMend)
def mapmend(ctx: TaskContext[MapMend]) -> dict[str, Any]:
    s = ctx.state

    def item(child: TaskContext[MapMend], x: int, index: int) -> int:
        value = piece(s.salt, x)
        if index in s.flaky:
            value += mend(s.salt, x)
        return refine(s.salt, x, value)

    values = ctx.map(range(s.items), item, name="mends", max_concurrency=s.limit).values()
    return {"values": values, "total": combine(s.salt, values)}


class ForkFan(BaseModel):
    salt: int
    children: int
    limit: int


@app.task(state=ForkFan)
def forkfan(ctx: TaskContext[ForkFan]) -> dict[str, Any]:
    s = ctx.state
    inputs = [leaf_input(s.salt, i) for i in range(s.children)]
    batch = ctx.map_tasks("leaf", inputs, name="forked", max_concurrency=s.limit)
    values = [result["value"] for result in batch.values()]
    return {"values": values, "total": combine(s.salt, values)}


def plan_input(rng: random.Random, name: str, salt: int) -> dict[str, Any]:
    """A random input for a task of this module."""
    if name == "forkfan":
        return {"salt": salt, "children": rng.randint(2, 4), "limit": 2}
    if name == "mending":
        children = rng.randint(3, 5)
        flaky = sorted(rng.sample(range(children), rng.randint(1, 2)))
        mode = rng.choice(MODES)
        return {"salt": salt, "children": children, "limit": 2, "flaky": flaky, "mode": mode}
    items = rng.randint(3, 6)
    flaky = sorted(rng.sample(range(items), rng.randint(1, 2)))
    return {"salt": salt, "items": items, "limit": 2, "flaky": flaky}


def plan_script(name: str, state: dict[str, Any]) -> dict[str, Any]:
    """What the outside world does: retry the task (or its failed children) when it fails,
    or fork it (the fork's id is the task's with ``FORK_SUFFIX``, set by the harness)."""
    if name == "forkfan":
        return {"fork": True}
    return {"retry": state.get("mode", "parent")}


def forks_of(plan: list[Any]) -> list[Any]:
    """The planned tasks the outside world forks from the plan's forkfan tasks (not started
    by the harness: ``fork_of`` in their input says whose fork they are)."""
    import dataclasses

    return [
        dataclasses.replace(
            task,
            task_id=f"{task.task_id}{FORK_SUFFIX}",
            input={**task.input, "fork_of": task.task_id},
            outside=None,
        )
        for task in plan
        if task.name == "forkfan"
    ]


def child_problem(
    parent_input: dict[str, Any], link: dict[str, Any], final: dict[str, Any]
) -> str | None:
    """What is wrong with how a mending task's child ended (None: nothing). A child ends
    succeeded once retried; one its parent's success did not need is left failed."""
    index = int(link.get("index", 0))
    state = {"salt": parent_input["salt"], "i": index, "flaky": index in parent_input["flaky"]}
    status = final.get("status")
    if status == "succeeded":
        want = expected_result("mendable", state)
        got = final.get("result")
        return None if got == want else f"succeeded with {got!r}, not {want!r}"
    error = final.get("error") or {}
    if status == "failed" and state["flaky"] and error.get("type") == MendFailedError.__name__:
        return None  # its parent gave up retrying (the parent's own check says so)
    return f"{status} {error.get('type')}: {error.get('message')}"


def expected_result(task_name: str, state: dict[str, Any]) -> Any:
    """The correct result of a task of this module (None: not one of them)."""
    if task_name == "mending":
        m = Mending.model_validate(state)
        values = [leaf_value(m.salt, i, 0) for i in range(m.children)]
        return {"values": values, "total": combine_value(m.salt, values)}
    if task_name == "mapmend":
        mm = MapMend.model_validate(state)
        values = [refine_value(mm.salt, x, piece_value(mm.salt, x)) for x in range(mm.items)]
        return {"values": values, "total": combine_value(mm.salt, values)}
    if task_name == "forkfan":
        ff = ForkFan.model_validate(state)
        values = [leaf_result(ff.salt, i)["value"] for i in range(ff.children)]
        return {"values": values, "total": combine_value(ff.salt, values)}
    if task_name == "mendable":
        child = Mendable.model_validate(state)
        return {"i": child.i, "value": leaf_value(child.salt, child.i, 0)}
    return None
