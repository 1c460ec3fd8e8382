"""The chaos tasks: deterministic work whose every real step execution lands in a ledger.

Each step sleeps a few milliseconds (its "work"), then appends one JSON line to the ledger
named by ``CHAOS_LEDGER`` — task id, turn, idempotency key, step, invocation — and fsyncs it
before returning. The ledger lives outside S3 and survives SIGKILL, so the harness can count
the executions that really happened and compare them with what the records' journals say.

Every result is a pure function of the task's input (:func:`expected_result`), so the harness
knows the correct answer without trusting the record.

Tasks:
    batch: a batch job over ``items`` items in chunks; per item ``fetch`` + ``transform``, per
        chunk an effect step ``commit``.
    agent: an agent-like loop; per turn ``think`` (decides how many tool calls), that many
        ``tool`` calls, and an effect step ``act``.
    poison: a step that kills its worker every time (the worker wrapper sees to that).
    runaway: a step that overruns the whole invocation budget every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from pydantic import BaseModel

import continuum
from continuum import Continuum, TaskContext
from continuum.steps import active_runner

#: The environment variable naming the ledger file (no ledger when unset).
LEDGER_ENV = "CHAOS_LEDGER"
#: Steps the worker wrapper treats specially: ``poison_step`` kills its worker every time.
POISON_STEP = "poison_step"
RUNAWAY_STEP = "runaway_step"
DOOMED = {"poison": POISON_STEP, "runaway": RUNAWAY_STEP}

app = Continuum(default_step_s=0.1, persist_every_s=0.25, visibility_margin_s=1)

#: The invocation the steps of this process run in (set by ``chaos.worker``).
_invocation: dict[str, Any] = {"id": "local", "deadline": None}


def set_invocation(invocation_id: str, deadline: float | None) -> None:
    """Name the emulated Lambda invocation (and its wall-clock deadline) steps run in."""
    _invocation["id"] = invocation_id
    _invocation["deadline"] = deadline


def _h(*parts: object) -> int:
    """A stable hash of ``parts`` (Python's ``hash`` is salted per process)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _ms(low: int, high: int, *parts: object) -> float:
    """A deterministic duration between ``low`` and ``high`` milliseconds, in seconds."""
    return (low + _h("ms", *parts) % (high - low + 1)) / 1000.0


def idempotency_key() -> str:
    """The running step's idempotency key (``task_id/turn/name#ordinal``)."""
    current = getattr(continuum, "current_context", None)
    if current is not None:
        return str(current().idempotency_key)
    runner = active_runner.get()  # before the library had current_context()
    return str(getattr(runner, "active_key", None))


def _work(step: str, seconds: float) -> None:
    """Do a step's work: sleep, then record the execution in the ledger, durably."""
    time.sleep(seconds)
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    key = idempotency_key()
    task_id, turn, _ = key.split("/", 2)
    line = {
        "task_id": task_id,
        "turn": int(turn),
        "key": key,
        "step": step,
        "inv": _invocation["id"],
        "deadline": _invocation["deadline"],
        "pid": os.getpid(),
        "t": time.time(),
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


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
    return None
