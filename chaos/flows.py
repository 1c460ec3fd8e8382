"""The chaos tasks that wait and fan out: sleeps, callbacks, signals, cancels, children.

Each is deterministic given its input and what the harness sends it (``chaos.outside``), and
its steps record every real execution in the ledger (``chaos.base``). What each must end as
is computed by the checks (``chaos.checks``) from the input and the harness's log, never read
from the record.

Tasks:
    sleeper: per turn a ``tick`` step, then ``ctx.sleep`` for a few seconds (longer than an
        invocation, longer than one timer delay: the worker lowers SQS's 900 s to a few
        seconds, so each sleep is a chain of timer hops).
    callback: a step, a callback with a timeout, ``cb.result()``, and a step that records how
        the wait ended (the answer, a failure, or the timeout).
    signals: a wait for a signal nobody sends (it must time out and take nothing), then one
        ``wait_for_signal("go")`` per turn until ``wants`` were taken, each handed to a step.
    cancellable: a few turns of steps, then (``fan``) child tasks that never finish, then a
        wait for a signal nobody sends: only a cancel ends it. Its ``cleanup`` step runs
        where ``TaskCancelledError`` arrives, once per delivered cancel.
    gathering: ``async def``: per turn ``asyncio.gather`` of ``width`` chores side by side,
        then a wait for a signal nobody sends: only a cancel ends it. A cancel reaches every
        gathered chore before it starts; the cleanup is a gather too, of two ``cleanup`` steps
        made after the cancel, each run once.
    fanmap: ``ctx.map`` over items on threads, two steps each, and a sleep inside some items.
    fantasks: ``ctx.map_tasks`` over ``leaf`` child tasks with ``max_concurrency``; some of
        them fail.
    invoker: two ``ctx.invoke`` of ``leaf`` children, the second of which may fail.
    leaf: a child task of two turns (a step each); it may fail at its second turn, or
        (``hold``) wait for a signal nobody sends, until its parent's cancel reaches it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from chaos.base import app, digest_int, duration_s, work
from continuum import (
    CallbackFailedError,
    CallbackTimeoutError,
    ChildTaskError,
    TaskCancelledError,
    TaskContext,
)

#: The signal every waiting task of this module waits for and nobody sends.
NEVER = "never"
#: The signal the signal task takes.
GO = "go"
#: How long the signal task waits for ``NEVER`` before it gives up (more than a budget).
QUIET_TIMEOUT_S = 1.5
#: The callback task's name for its callback.
ANSWER = "answer"


# -- the pure functions the steps compute ----------------------------------------------------


def tick_value(salt: int, i: int) -> int:
    return digest_int("tick", salt, i) % 1000


def prepare_value(salt: int) -> int:
    return digest_int("prepare", salt) % 10000


def conclude_value(salt: int, outcome: str) -> str:
    return f"{digest_int('conclude', salt, outcome) % 100000:05d}"


def chore_value(salt: int, i: int) -> int:
    return digest_int("chore", salt, i) % 997


def piece_value(salt: int, x: int) -> int:
    return digest_int("piece", salt, x) % 1000


def refine_value(salt: int, x: int, value: int) -> int:
    return (value * 3 + digest_int("refine", salt, x)) % 10007


def combine_value(salt: int, values: list[int]) -> str:
    return f"{digest_int('combine', salt, values) % 10**8:08d}"


def leaf_value(salt: int, i: int, turn: int) -> int:
    return digest_int("leaf", salt, i, turn) % 1000


# -- steps -----------------------------------------------------------------------------------


@app.step
def tick(salt: int, i: int) -> int:
    work("tick", duration_s(5, 15, "tick", salt, i))
    return tick_value(salt, i)


@app.step
def prepare(salt: int) -> int:
    work("prepare", duration_s(5, 15, "prepare", salt))
    return prepare_value(salt)


@app.step(effect=True)
def conclude(salt: int, outcome: str) -> str:
    work("conclude", duration_s(5, 15, "conclude", salt))
    return conclude_value(salt, outcome)


@app.step
def handle_signal(salt: int, payload: Any) -> Any:
    work("handle_signal", duration_s(5, 15, "handle_signal", salt, payload))
    return payload


@app.step
def chore(salt: int, i: int) -> int:
    work("chore", duration_s(60, 120, "chore", salt, i))
    return chore_value(salt, i)


@app.step(effect=True)
def cleanup(salt: int, who: str) -> str:
    """What a cancelled task does before it ends: must run once per delivered cancel."""
    work("cleanup", duration_s(5, 15, "cleanup", salt, who))
    return f"cleaned {who}"


@app.step
def piece(salt: int, x: int) -> int:
    work("piece", duration_s(10, 30, "piece", salt, x))
    return piece_value(salt, x)


@app.step
def refine(salt: int, x: int, value: int) -> int:
    work("refine", duration_s(10, 30, "refine", salt, x))
    return refine_value(salt, x, value)


@app.step(effect=True)
def combine(salt: int, values: list[int]) -> str:
    work("combine", duration_s(5, 15, "combine", salt))
    return combine_value(salt, values)


@app.step
def leaf_work(salt: int, i: int, turn: int) -> int:
    work("leaf_work", duration_s(10, 30, "leaf_work", salt, i, turn))
    return leaf_value(salt, i, turn)


class LeafFailed(Exception):
    """What a failing leaf's step raises (the child fails with it)."""


@app.step
def leaf_fail(salt: int, i: int) -> int:
    work("leaf_fail", 0.005)
    raise LeafFailed(f"leaf {i} of {salt} fails as planned")


# -- tasks -----------------------------------------------------------------------------------


class Sleeper(BaseModel):
    salt: int
    naps: list[float]
    ticks: list[int] = []


# Version 2: an older worker of version 1 must leave its records alone (``chaos.rollback``).
@app.task(state=Sleeper, version=2, migrations={1: lambda state: state})
def sleeper(ctx: TaskContext[Sleeper]) -> dict[str, Any] | None:
    s = ctx.state
    i = len(s.ticks)
    s.ticks.append(tick(s.salt, i))
    if i < len(s.naps):
        ctx.sleep(s.naps[i], name=f"nap{i}")
        return None
    return {"ticks": s.ticks}


class CallbackWait(BaseModel):
    salt: int
    mode: str  # what the harness does: complete, twice, fail or late (see chaos.outside)
    timeout_s: float


def outcome_of(got: dict[str, Any]) -> str:
    """The text ``conclude`` is given for how a callback wait ended (sorted JSON)."""
    import json

    return json.dumps(got, sort_keys=True)


@app.task(state=CallbackWait)
def callback(ctx: TaskContext[CallbackWait]) -> dict[str, Any]:
    s = ctx.state
    before = prepare(s.salt)
    cb = ctx.create_callback(ANSWER, timeout=s.timeout_s)
    got: dict[str, Any]
    try:
        got = {"got": "value", "value": cb.result()}
    except CallbackTimeoutError:
        got = {"got": "timeout"}
    except CallbackFailedError as exc:
        got = {"got": "failed", "type": exc.error_type}
    return {"before": before, "outcome": got, "after": conclude(s.salt, outcome_of(got))}


class Signals(BaseModel):
    salt: int
    wants: int
    quiet: bool | None = None
    taken: list[Any] = []


@app.task(state=Signals)
def signals(ctx: TaskContext[Signals]) -> dict[str, Any] | None:
    s = ctx.state
    if s.quiet is None:
        s.quiet = ctx.wait_for_signal(NEVER, timeout=QUIET_TIMEOUT_S) is None
        return None
    signal = ctx.wait_for_signal(GO)
    s.taken.append(handle_signal(s.salt, signal.payload if signal is not None else None))
    return {"quiet": s.quiet, "taken": s.taken} if len(s.taken) >= s.wants else None


class Cancellable(BaseModel):
    salt: int
    chores: int
    fan: int = 0  # child tasks that hold until cancelled (0: none)
    done: list[int] = []


@app.task(state=Cancellable)
def cancellable(ctx: TaskContext[Cancellable]) -> dict[str, Any] | None:
    s = ctx.state
    try:
        if len(s.done) < s.chores:
            s.done.append(chore(s.salt, len(s.done)))
            return None
        if s.fan:
            inputs = [{"salt": s.salt, "i": i, "hold": True} for i in range(s.fan)]
            ctx.map_tasks("leaf", inputs, name="held", max_concurrency=2)
        ctx.wait_for_signal(NEVER)
        return {"done": s.done}  # never: nobody sends NEVER
    except TaskCancelledError:
        cleanup(s.salt, "cancellable")
        raise


class Gathering(BaseModel):
    salt: int
    rounds: int
    width: int
    done: list[list[int]] = []


@app.task(state=Gathering)
async def gathering(ctx: TaskContext[Gathering]) -> dict[str, Any] | None:
    s = ctx.state
    try:
        if len(s.done) < s.rounds:
            first = len(s.done) * s.width
            chores = (ctx.step_async(chore, s.salt, first + i) for i in range(s.width))
            s.done.append(list(await asyncio.gather(*chores)))
            return None
        await ctx.wait_for_signal_async(NEVER)
        return {"done": s.done}  # never: nobody sends NEVER
    except TaskCancelledError:
        await asyncio.gather(*(ctx.step_async(cleanup, s.salt, f"gathering {i}") for i in (0, 1)))
        raise


class FanMap(BaseModel):
    salt: int
    items: int
    limit: int
    pause: dict[int, float] = {}  # item index -> seconds it sleeps between its two steps


@app.task(state=FanMap)
def fanmap(ctx: TaskContext[FanMap]) -> dict[str, Any]:
    s = ctx.state

    def item(child: TaskContext[FanMap], x: int, index: int) -> int:
        value = piece(s.salt, x)
        if index in s.pause:
            child.sleep(s.pause[index], name="pause")
        return refine(s.salt, x, value)

    values = ctx.map(range(s.items), item, name="items", max_concurrency=s.limit).values()
    return {"values": values, "total": combine(s.salt, values)}


class FanTasks(BaseModel):
    salt: int
    children: int
    limit: int
    fail: list[int] = []


def leaf_input(salt: int, i: int, *, fail: bool = False, hold: bool = False) -> dict[str, Any]:
    return {"salt": salt, "i": i, "fail": fail, "hold": hold}


@app.task(state=FanTasks)
def fantasks(ctx: TaskContext[FanTasks]) -> dict[str, Any]:
    s = ctx.state
    first = prepare(s.salt)
    inputs = [leaf_input(s.salt, i, fail=i in s.fail) for i in range(s.children)]
    batch = ctx.map_tasks("leaf", inputs, name="leaves", max_concurrency=s.limit)
    values = [item.result["value"] if item.status == "succeeded" else 0 for item in batch.items]
    failed = [item.index for item in batch.items if item.status != "succeeded"]
    return {"first": first, "failed": failed, "total": combine(s.salt, values)}


class Invoker(BaseModel):
    salt: int
    fail_second: bool = False


@app.task(state=Invoker)
def invoker(ctx: TaskContext[Invoker]) -> dict[str, Any]:
    s = ctx.state
    first = ctx.invoke("leaf", leaf_input(s.salt, 0), name="first")
    mid = combine(s.salt, [first["value"]])
    second: dict[str, Any]
    try:
        got = ctx.invoke("leaf", leaf_input(s.salt, 1, fail=s.fail_second), name="second")
        second = {"ok": got}
    except ChildTaskError as exc:
        second = {"error": exc.error_type}
    return {"first": first, "mid": mid, "second": second}


class Leaf(BaseModel):
    salt: int
    i: int
    fail: bool = False
    hold: bool = False
    done: list[int] = []


#: Turns a leaf takes (a step each).
LEAF_TURNS = 2


@app.task(state=Leaf)
def leaf(ctx: TaskContext[Leaf]) -> dict[str, Any] | None:
    s = ctx.state
    try:
        turn = len(s.done)
        s.done.append(leaf_work(s.salt, s.i, turn))
        if s.fail and turn == 1:
            leaf_fail(s.salt, s.i)
        if s.hold:
            ctx.wait_for_signal(NEVER)
        return {"i": s.i, "value": sum(s.done)} if len(s.done) >= LEAF_TURNS else None
    except TaskCancelledError:
        cleanup(s.salt, f"leaf{s.i}")
        raise


# -- what the harness expects (of the kinds whose end the input alone decides) ---------------


def leaf_result(salt: int, i: int) -> dict[str, Any]:
    return {"i": i, "value": sum(leaf_value(salt, i, t) for t in range(LEAF_TURNS))}


def expected_result(task_name: str, state: dict[str, Any]) -> Any:
    """The correct result of a task of this module started with ``state`` (None: it has
    none, or it depends on what the harness sends: the checks work it out)."""
    if task_name == "sleeper":
        sleep = Sleeper.model_validate(state)
        return {"ticks": [tick_value(sleep.salt, i) for i in range(len(sleep.naps) + 1)]}
    if task_name == "fanmap":
        fan = FanMap.model_validate(state)
        values = [refine_value(fan.salt, x, piece_value(fan.salt, x)) for x in range(fan.items)]
        return {"values": values, "total": combine_value(fan.salt, values)}
    if task_name == "fantasks":
        tasks = FanTasks.model_validate(state)
        values = [
            0 if i in tasks.fail else leaf_result(tasks.salt, i)["value"]
            for i in range(tasks.children)
        ]
        return {
            "first": prepare_value(tasks.salt),
            "failed": sorted(tasks.fail),
            "total": combine_value(tasks.salt, values),
        }
    if task_name == "invoker":
        inv = Invoker.model_validate(state)
        first = leaf_result(inv.salt, 0)
        second = {"error": "LeafFailed"} if inv.fail_second else {"ok": leaf_result(inv.salt, 1)}
        return {
            "first": first,
            "mid": combine_value(inv.salt, [first["value"]]),
            "second": second,
        }
    if task_name == "leaf":
        child = Leaf.model_validate(state)
        return None if child.fail or child.hold else leaf_result(child.salt, child.i)
    return None
