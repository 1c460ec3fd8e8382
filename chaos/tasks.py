"""The chaos tasks: deterministic work whose every real step execution lands in a ledger.

The app, and the ledger each step writes to, are ``chaos.base``; the tasks that wait and fan
out are ``chaos.flows`` (imported here, so that importing this module registers them all).
Every result is a pure function of the task's input (:func:`expected_result`), or of its
input and what the harness sent it, so the harness knows the correct answer without trusting
the record.

Tasks:
    batch: a batch job over ``items`` items in chunks; per item ``fetch`` + ``transform``, per
        chunk an effect step ``commit``.
    agent: an agent-like loop; per turn ``think`` (decides how many tool calls), that many
        ``tool`` calls, and an effect step ``act``.
    poison: a step that kills its worker every time (the worker wrapper sees to that).
    runaway: a step that overruns the whole invocation budget every time.
    blobs: a crawl whose state grows past the app's inline limit (4 KiB) and whose large
        ``page`` result alternates between two contents, so every turn writes blobs, supersedes
        others and reuses a content that an earlier turn's blob had (and that another worker
        may have deleted since). Its invocations are ``LONG_LEASE_S`` longer (see there).
    nan: a step returns NaN or infinity at turn ``at`` (``where="step"``), or the task puts
        it in its state (``where="state"``): the task must fail once, naming the step or
        the field, with ``UnserializableValueError``.
    pool: at turn ``at`` the task calls a step from a ``ThreadPoolExecutor`` thread: the call
        must be refused (the task fails naming the step) and the step's body never run.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from chaos import flows, steering
from chaos.base import (
    LEDGER_ENV,
    LONG_LEASE_S,
    SAFETY_MARGIN_S,
    app,
    digest_int,
    duration_s,
    invocation_budget,
    set_invocation,
    work,
)
from continuum import TaskContext

__all__ = [
    "DOOMED",
    "LEDGER_ENV",
    "POISON_STEP",
    "POOL_THREAD",
    "app",
    "expected_result",
    "flows",
    "invocation_budget",
    "set_invocation",
    "steering",
]

#: Steps the worker wrapper treats specially: ``poison_step`` kills its worker every time.
POISON_STEP = "poison_step"
RUNAWAY_STEP = "runaway_step"
DOOMED = {"poison": POISON_STEP, "runaway": RUNAWAY_STEP}
#: The name prefix of the thread pool the pool task calls its step from.
POOL_THREAD = "chaos-pool"
_h, _ms, _work = digest_int, duration_s, work


# -- the pure functions the steps compute ----------------------------------------------------


def fetch_value(salt: int, item: int) -> int:
    return _h("fetch", salt, item) % 1000


def transform_value(salt: int, item: int, value: int) -> int:
    return (value * 7 + _h("transform", salt, item)) % 10007


def commit_digest(salt: int, upto: int, total: int) -> str:
    return f"{_h('commit', salt, upto, total):016x}"


def think_value(topic: str, salt: int, turn: int) -> dict[str, Any]:
    return {"calls": _h("think", topic, salt, turn) % 4, "text": f"{topic} turn {turn}"}


def tool_value(topic: str, salt: int, turn: int, i: int) -> str:
    return f"{topic}:{turn}:{i}:{_h('tool', topic, salt, turn, i) % 10000}"


def act_value(topic: str, salt: int, turn: int, summary: str) -> str:
    return f"t{turn}:{_h('act', topic, salt, turn, summary) % 100000}"


#: 16 hex digits per chunk: a page is about 6 KiB of JSON, over the inline limit.
PAGE_CHUNKS = 400
#: A note is 512 characters: the blob task's state passes the inline limit after 8 turns.
NOTE_CHUNKS = 32


def _hex(chunks: int, *parts: object) -> str:
    return "".join(f"{_h(*parts, i):016x}" for i in range(chunks))


def page_value(salt: int, variant: int) -> str:
    return _hex(PAGE_CHUNKS, "page", salt, variant)


def note_value(salt: int, turn: int, page: str) -> str:
    return f"{turn}:" + _hex(NOTE_CHUNKS, "note", salt, turn, page[:32])


def measure_value(salt: int, turn: int, value: str) -> float:
    """What ``measure`` returns: ``float(value)`` if given (NaN, inf), else a finite number."""
    return float(value) if value else (_h("measure", salt, turn) % 1000) / 10


# -- steps -----------------------------------------------------------------------------------


@app.step
def fetch(salt: int, item: int) -> int:
    _work("fetch", _ms(5, 15, "fetch", salt, item))
    return fetch_value(salt, item)


@app.step
def transform(salt: int, item: int, value: int) -> int:
    _work("transform", _ms(5, 10, "transform", salt, item))
    return transform_value(salt, item, value)


@app.step(effect=True)
def commit(salt: int, upto: int, total: int) -> str:
    _work("commit", _ms(10, 20, "commit", salt, upto))
    return commit_digest(salt, upto, total)


@app.step
def think(topic: str, salt: int, turn: int) -> dict[str, Any]:
    _work("think", _ms(30, 50, "think", topic, salt, turn))
    return think_value(topic, salt, turn)


@app.step
def tool(topic: str, salt: int, turn: int, i: int) -> str:
    _work("tool", _ms(10, 30, "tool", topic, salt, turn, i))
    return tool_value(topic, salt, turn, i)


@app.step(effect=True)
def act(topic: str, salt: int, turn: int, summary: str) -> str:
    _work("act", _ms(10, 20, "act", topic, salt, turn))
    return act_value(topic, salt, turn, summary)


@app.step
def poison_step(salt: int) -> int:
    _work(POISON_STEP, 0.005)
    return salt


@app.step
def runaway_step(seconds: float) -> float:
    _work(RUNAWAY_STEP, seconds)
    return seconds


@app.step
def page(salt: int, variant: int) -> str:
    _work("page", _ms(30, 60, "page", salt, variant))
    return page_value(salt, variant)


@app.step(effect=True)  # the journal is saved after it: one record write (and blobs) per turn
def note(salt: int, turn: int, text: str) -> str:
    _work("note", _ms(5, 15, "note", salt, turn))
    return note_value(salt, turn, text)


@app.step
def measure(salt: int, turn: int, value: str) -> float:
    _work("measure", _ms(5, 15, "measure", salt, turn))
    return measure_value(salt, turn, value)


@app.step
def pooled(salt: int, i: int) -> int:
    _work("pooled", 0.005)
    return fetch_value(salt, i)


# -- tasks -----------------------------------------------------------------------------------


class Batch(BaseModel):
    items: int
    chunk: int
    salt: int
    done: int = 0
    total: int = 0
    digest: str = ""


class Agent(BaseModel):
    topic: str
    max_turns: int
    salt: int
    messages: list[str] = []


class Doomed(BaseModel):
    salt: int
    seconds: float = 0.0
    warmed: int = 0


class Blobs(BaseModel):
    salt: int
    turns: int
    notes: list[str] = []


class Measured(BaseModel):
    salt: int
    at: int
    where: str  # "step" or "state"
    value: str  # "nan", "inf" or "-inf"
    turns: int = 0
    score: float = 0.0


class Pooled(BaseModel):
    salt: int
    at: int
    values: list[int] = []


@app.task(state=Batch)
def batch(ctx: TaskContext[Batch]) -> dict[str, Any] | None:
    s = ctx.state
    end = min(s.items, s.done + s.chunk)
    for item in range(s.done, end):
        s.total += transform(s.salt, item, fetch(s.salt, item))
    s.digest = commit(s.salt, end, s.total)
    s.done = end
    return {"total": s.total, "digest": s.digest} if s.done >= s.items else None


@app.task(state=Agent)
def agent(ctx: TaskContext[Agent]) -> dict[str, Any] | None:
    s = ctx.state
    turn = len(s.messages)
    plan = think(s.topic, s.salt, turn)
    found = [tool(s.topic, s.salt, turn, i) for i in range(plan["calls"])]
    s.messages.append(act(s.topic, s.salt, turn, plan["text"] + "|" + ";".join(found)))
    return {"messages": s.messages} if len(s.messages) >= s.max_turns else None


@app.task(state=Doomed)
def poison(ctx: TaskContext[Doomed]) -> int | None:
    s = ctx.state
    if not s.warmed:
        s.warmed = fetch(s.salt, 0) + 1
        return None
    return poison_step(s.salt)


@app.task(state=Doomed)
def runaway(ctx: TaskContext[Doomed]) -> float | None:
    s = ctx.state
    if not s.warmed:
        s.warmed = fetch(s.salt, 0) + 1
        return None
    return runaway_step(s.seconds)


@app.task(state=Blobs, safety_margin_s=SAFETY_MARGIN_S + LONG_LEASE_S)
def blobs(ctx: TaskContext[Blobs]) -> dict[str, Any] | None:
    s = ctx.state
    turn = len(s.notes)
    s.notes.append(note(s.salt, turn, page(s.salt, turn % 2)))
    return {"notes": s.notes} if len(s.notes) >= s.turns else None


#: Turns a NaN task takes after ``at`` if it did not fail (it must fail at ``at``).
NAN_TAIL = 3


@app.task(state=Measured)
def nan(ctx: TaskContext[Measured]) -> dict[str, Any] | None:
    s = ctx.state
    turn = s.turns
    here = turn == s.at
    x = measure(s.salt, turn, s.value if here and s.where == "step" else "")
    s.score = float(s.value) if here and s.where == "state" else s.score + x
    s.turns += 1
    return {"score": s.score} if s.turns > s.at + NAN_TAIL else None


@app.task(state=Pooled)
def pool(ctx: TaskContext[Pooled]) -> dict[str, Any] | None:
    s = ctx.state
    if len(s.values) < s.at:
        s.values.append(fetch(s.salt, len(s.values)))
        return None
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix=POOL_THREAD) as threads:
        s.values += threads.map(functools.partial(pooled, s.salt), range(2))
    return {"values": s.values}


# -- what the harness expects ----------------------------------------------------------------


def expected_result(task_name: str, state: dict[str, Any]) -> Any:
    """The correct result of a task started with ``state`` (None: the task must fail)."""
    if task_name == "batch":
        b = Batch.model_validate(state)
        total = sum(transform_value(b.salt, i, fetch_value(b.salt, i)) for i in range(b.items))
        return {"total": total, "digest": commit_digest(b.salt, b.items, total)}
    if task_name == "agent":
        a = Agent.model_validate(state)
        messages = []
        for turn in range(a.max_turns):
            plan = think_value(a.topic, a.salt, turn)
            found = [tool_value(a.topic, a.salt, turn, i) for i in range(plan["calls"])]
            summary = plan["text"] + "|" + ";".join(found)
            messages.append(act_value(a.topic, a.salt, turn, summary))
        return {"messages": messages}
    if task_name == "blobs":
        c = Blobs.model_validate(state)
        notes = [note_value(c.salt, t, page_value(c.salt, t % 2)) for t in range(c.turns)]
        return {"notes": notes}
    if task_name in steering.SHARES or task_name == "mendable":
        return steering.expected_result(task_name, state)
    return flows.expected_result(task_name, state)
