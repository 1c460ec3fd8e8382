"""Cancelling a parent cancels its children: those running (asleep here), those pending
behind ``max_concurrency``, and those its worker is creating at that very moment.

Every test runs in both flavours (``tests/flavours.py``): the async twins of parent and
children await their steps, ``sleep_async``, ``wait_for_signal_async``, ``map_tasks_async``
and ``invoke_async``.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import StoreFaults
from tests.fanout.kit import WorkerDied, runtime_on, settle
from tests.flavours import FLAVOURS

N = 6


class Parent(BaseModel):
    n: int = N


class Kid(BaseModel):
    i: int


def family_app(flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()

    def count(tag: str) -> str:
        with lock:
            ran[tag] += 1
        return tag

    if flavour == "sync":

        @app.step(effect=True)
        def note(tag: str) -> str:
            return count(tag)

        @app.task(state=Kid)
        def kid(ctx: TaskContext[Kid]) -> str:
            note(f"kid {ctx.state.i} began")
            ctx.sleep(3600)
            return note(f"kid {ctx.state.i} ended")

        @app.task(state=Parent)
        def parent(ctx: TaskContext[Parent]) -> Any:
            kids = [Kid(i=i) for i in range(ctx.state.n)]
            batch = ctx.map_tasks("kid", kids, max_concurrency=2)
            return note(f"parent got {batch.success_count}")

    else:

        @app.step(effect=True)
        async def note(tag: str) -> str:
            return count(tag)

        @app.task(state=Kid)
        async def kid(ctx: TaskContext[Kid]) -> str:
            await note(f"kid {ctx.state.i} began")
            await ctx.sleep_async(3600)
            return await note(f"kid {ctx.state.i} ended")

        @app.task(state=Parent)
        async def parent(ctx: TaskContext[Parent]) -> Any:
            kids = [Kid(i=i) for i in range(ctx.state.n)]
            batch = await ctx.map_tasks_async("kid", kids, max_concurrency=2)
            return await note(f"parent got {batch.success_count}")

    return app, ran


def run_visible(runtime: Any) -> None:
    """Run the messages visible now, without moving the clock (no sleep ends)."""
    while runtime.invoke_once() is not None:
        pass


def check_all_cancelled(runtime: Any, task_id: str, ran: Counter[str]) -> None:
    parent = runtime.record(task_id)
    assert parent.status == Status.CANCELLED
    kids = [runtime.record(c) for b in parent.children for c in b.ids()]
    assert len(kids) == N
    assert [k.status for k in kids] == [Status.CANCELLED] * N
    assert not [tag for tag in ran if "ended" in tag or "parent" in tag]
    assert runtime.next_due() is None  # nothing left to run, nothing stranded


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancelling_a_waiting_parent_cancels_its_running_and_pending_children(backend, flavour):
    app, ran = family_app(flavour)
    with runtime_on(backend, app) as runtime, runtime.time.running():
        task_id = app.client().start("parent", Parent())
        run_visible(runtime)
        assert runtime.record(task_id).status == Status.WAITING
        assert ran == Counter({"kid 0 began": 1, "kid 1 began": 1})  # two asleep, four pending
        app.client().cancel(task_id, "not needed")
        settle(runtime)
        check_all_cancelled(runtime, task_id, ran)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_cancel_that_arrives_while_the_parent_creates_its_children_cancels_them_all(flavour):
    app, ran = family_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        created: list[str] = []
        box: dict[str, str] = {}

        def cancel_mid_creation(call: Any, key: str, body: bytes, **kwargs: Any) -> Any:
            result = call(key, body, **kwargs)
            if key.endswith("/record.json") and json.loads(body).get("status") == "pending":
                created.append(key)
                if len(created) == 3 + 1:  # the parent, then the third child
                    app.client().cancel(box["parent"], "changed my mind")
            return result

        StoreFaults(app).around("put", cancel_mid_creation)
        box["parent"] = task_id = app.client().start("parent", Parent())
        settle(runtime)
        check_all_cancelled(runtime, task_id, ran)
    assert len(created) == N + 1  # the creation went on; the children it made were cancelled


class Held(BaseModel):
    calls: str = "map_tasks"


def held_app(flavour: str = "sync") -> tuple[Continuum, Counter[str]]:
    """A parent runs a step, starts children that wait for ever, and waits for ever too."""
    app = Continuum(visibility_margin_s=None)
    ran: Counter[str] = Counter()

    if flavour == "sync":

        @app.step
        def prepare() -> str:
            ran["prepare"] += 1
            return "ready"

        @app.task(state=Kid)
        def held(ctx: TaskContext[Kid]) -> None:
            ctx.wait_for_signal("never")

        @app.task(state=Held)
        def parent(ctx: TaskContext[Held]) -> None:
            prepare()
            if ctx.state.calls == "invoke":
                ctx.invoke("held", Kid(i=0), name="one")
            else:
                kids = [Kid(i=i) for i in range(3)]
                ctx.map_tasks("held", kids, name="many", max_concurrency=2)
            ctx.wait_for_signal("never")

    else:

        @app.step
        async def prepare() -> str:
            ran["prepare"] += 1
            return "ready"

        @app.task(state=Kid)
        async def held(ctx: TaskContext[Kid]) -> None:
            await ctx.wait_for_signal_async("never")

        @app.task(state=Held)
        async def parent(ctx: TaskContext[Held]) -> None:
            await prepare()
            if ctx.state.calls == "invoke":
                await ctx.invoke_async("held", Kid(i=0), name="one")
            else:
                kids = [Kid(i=i) for i in range(3)]
                await ctx.map_tasks_async("held", kids, name="many", max_concurrency=2)
            await ctx.wait_for_signal_async("never")

    return app, ran


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("calls", ["map_tasks", "invoke"])
def test_children_a_dead_worker_started_are_cancelled_with_their_parent(calls, flavour):
    """Seed 1 (cancellable-1-0119): the parent's worker created its
    children and started the first, and died before the parent's record said so. A cancel
    then reached the parent: its next worker ran the step before the children again (it had
    not been saved), met the cancel there, and ended the parent cancelled without knowing of
    its children, which waited for ever. The record now names the children before they are
    created, so the cancel reaches every child a dead worker may have made."""
    app, ran = held_app(flavour)
    with runtime_on("memory", app) as runtime, runtime.time.running():
        task_id = app.client().start("parent", Held(calls=calls))
        queue = app.continuations.queue
        send = queue.send

        def die_after_a_child_start(body: str, *, delay_s: int = 0) -> str:
            sent = send(body, delay_s=delay_s)
            if json.loads(body).get("task_id", "").startswith(f"{task_id}."):
                queue.send = send  # once
                app.client().cancel(task_id, "not needed")  # before the parent's next worker
                raise WorkerDied("killed after a child's start")
            return sent

        queue.send = die_after_a_child_start
        assert settle(runtime) == 1
        parent = runtime.record(task_id)
        assert parent.status == Status.CANCELLED
        made = runtime.store.live_keys(f"*/{task_id}.*/record.json")
        kids = [key.split("/")[-2] for key in made]
        assert kids, "the dead worker created no child"
        assert {runtime.record(kid).status for kid in kids} == {Status.CANCELLED}
        assert runtime.next_due() is None  # nothing left to run, nothing stranded
        assert ran["prepare"] == 1  # saved with the children's names: not run again
