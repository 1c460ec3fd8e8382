"""Workers killed at each write of fan-out, duplicated and lost wakes.

A parent fans out to four child tasks, two at a time (``map_tasks``), then ``invoke``s one
more. Each child runs one effect step (journaled as soon as it ran), the parent one before
and one after. A worker is killed once (``WorkerDied``, nothing catches it) before or right
after the first write or send that a case names; its message comes back after the
visibility timeout. Whatever was killed: the parent ends with the right result, no step ran
twice (the test's own ledger), and every record ends finished with nothing left in the queue.

Every test runs in both flavours (``tests/flavours.py``): the async twin of parent and
children awaits its steps, ``map_tasks_async`` and ``invoke_async``.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.fanout.kit import Trap, message_of, runtime_on, settle
from tests.flavours import FLAVOURS
from tests.support import CHILD_RECHECK_S

N = 4
FINISHED = {"succeeded", "failed", "cancelled"}


class Fan(BaseModel):
    n: int = N


class Leaf(BaseModel):
    i: int


def fan_app(flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()

    def count(tag: str, value: int) -> int:
        with lock:
            ran[tag] += 1
        return value

    if flavour == "sync":

        @app.step(effect=True)
        def work(tag: str, value: int) -> int:
            return count(tag, value)

        @app.task(state=Leaf)
        def leaf(ctx: TaskContext[Leaf]) -> int:
            return work(f"leaf {ctx.state.i}", ctx.state.i * 10)

        @app.task(state=Fan)
        def fan(ctx: TaskContext[Fan]) -> dict[str, Any]:
            base = work("parent before", 1)
            leaves = [Leaf(i=i) for i in range(ctx.state.n)]
            batch = ctx.map_tasks("leaf", leaves, max_concurrency=2)
            extra = ctx.invoke("leaf", Leaf(i=99), name="extra")
            return {"values": batch.values(), "extra": extra, "after": work("parent after", base)}

    else:

        @app.step(effect=True)
        async def work(tag: str, value: int) -> int:
            return count(tag, value)

        @app.task(state=Leaf)
        async def leaf(ctx: TaskContext[Leaf]) -> int:
            return await work(f"leaf {ctx.state.i}", ctx.state.i * 10)

        @app.task(state=Fan)
        async def fan(ctx: TaskContext[Fan]) -> dict[str, Any]:
            base = await work("parent before", 1)
            leaves = [Leaf(i=i) for i in range(ctx.state.n)]
            batch = await ctx.map_tasks_async("leaf", leaves, max_concurrency=2)
            extra = await ctx.invoke_async("leaf", Leaf(i=99), name="extra")
            after = await work("parent after", base)
            return {"values": batch.values(), "extra": extra, "after": after}

    return app, ran


def is_child(key: str) -> bool:
    return ".map_tasks" in key or ".extra" in key


def child_record(status: set[str]):
    def match(key: str, body: dict[str, Any]) -> bool:
        return key.endswith("/record.json") and is_child(key) and body.get("status") in status

    return match


def parent_record(status: set[str]):
    def match(key: str, body: dict[str, Any]) -> bool:
        return key.endswith("/record.json") and not is_child(key) and body.get("status") in status

    return match


def report(key: str, body: dict[str, Any]) -> bool:
    return "/inbox/children/" in key


def parent_wake(task_id: str, body: dict[str, Any]) -> bool:
    return body.get("kind") == "wake" and not is_child(task_id)


def start_of(index: int):
    def match(task_id: str, body: dict[str, Any]) -> bool:
        place = re.search(r"\.map_tasks\.leaf-\d+\.(\d+)$", task_id)
        return body.get("reason") == "start" and place is not None and int(place[1]) == index

    return match


TRAPS = {
    "child finish write, before it lands": Trap("put", child_record(FINISHED)),
    "child finish write, after it landed (before its report)": Trap(
        "put", child_record(FINISHED), after=True
    ),
    "child report put, before it lands": Trap("put", report),
    "child report put, after it landed (before the wake)": Trap("put", report, after=True),
    "parent wake send": Trap("send", parent_wake),
    "successor start send": Trap("send", start_of(2)),
    "map_tasks child creation (the third)": Trap("put", child_record({"pending"}), nth=3),
    "first children's start send": Trap("send", start_of(1)),
    "parent waiting write, after it landed": Trap("put", parent_record({"waiting"}), after=True),
    "parent fan-in write (the finish), before it lands": Trap("put", parent_record({"succeeded"})),
    "parent fan-in write (the finish), after it landed": Trap(
        "put", parent_record({"succeeded"}), after=True
    ),
    "parent resume write after the wake, after it landed": Trap(
        "put", parent_record({"running"}), after=True, nth=2
    ),
}
RUNS = [("memory", name) for name in TRAPS] + [
    ("moto", "child finish write, after it landed (before its report)"),
    ("moto", "parent wake send"),
]


def check_the_end(runtime: Any, task_id: str, ran: Counter[str]) -> None:
    done = runtime.record(task_id)
    assert done.status == Status.SUCCEEDED, done.error
    assert done.result == {"values": [0, 10, 20, 30], "extra": 990, "after": 1}
    tags = ["parent before", "parent after", "leaf 99"] + [f"leaf {i}" for i in range(N)]
    assert ran == Counter(dict.fromkeys(tags, 1))  # no recorded step ran twice
    children = [runtime.record(c) for b in done.children for c in b.ids()]
    assert len(children) == N + 1
    assert {c.status for c in children} == {Status.SUCCEEDED}
    assert runtime.next_due() is None  # nothing stranded in the queue


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(("where", "name"), RUNS)
def test_a_worker_killed_at_any_fan_out_write_loses_nothing_and_repeats_no_step(
    where, name, flavour
):
    trap = TRAPS[name].fresh()
    app, ran = fan_app(flavour)
    with runtime_on(where, app) as runtime, runtime.time.running():
        trap.arm(app)
        task_id = app.client().start("fan", Fan())
        deaths = settle(runtime)
        check_the_end(runtime, task_id, ran)
    assert trap.sprung
    assert deaths == 1  # the kill happened, once


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_duplicated_child_finished_wakes_and_reports_count_once(flavour):
    app, ran = fan_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        queue = app.continuations.queue
        send = queue.send
        doubled: Counter[str] = Counter()

        def twice(body: str, *, delay_s: int = 0) -> str:
            if '"kind":"wake"' in body.replace(" ", ""):
                doubled["wake"] += 1
                send(body, delay_s=delay_s)
            return send(body, delay_s=delay_s)

        queue.send = twice
        task_id = app.client().start("fan", Fan())
        settle(runtime)
        check_the_end(runtime, task_id, ran)
        parent = runtime.record(task_id)
    assert doubled["wake"] >= N + 1  # every child's wake was delivered twice
    assert parent.counters.invocations <= 4  # the duplicates woke no extra turn


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_child_whose_wake_is_lost_is_still_counted_by_the_waiting_parents_recheck(flavour):
    """No worker died: the invoked child's message was acknowledged, only its wake (the one
    thing that would wake the parent) never arrived."""
    app, ran = fan_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        queue = app.continuations.queue
        send = queue.send
        lost: list[str] = []

        def lose_the_extra_childs_wake(body: str, *, delay_s: int = 0) -> str:
            fields = message_of(body)
            if fields.get("kind") == "wake" and ".extra" in fields.get("reason", ""):
                lost.append(body)
                return "lost"
            return send(body, delay_s=delay_s)

        queue.send = lose_the_extra_childs_wake
        task_id = app.client().start("fan", Fan())
        settle(runtime)
        check_the_end(runtime, task_id, ran)
        parent = runtime.record(task_id)
        [extra] = [runtime.record(b.prefix) for b in parent.children if b.single]
    assert len(lost) == 1
    assert parent.finished_at is not None
    assert extra.finished_at is not None
    # The parent heard of it only at its periodic recheck, not from a wake.
    late = (parent.finished_at - extra.finished_at).total_seconds()
    assert CHILD_RECHECK_S - 60 <= late <= CHILD_RECHECK_S + 60
