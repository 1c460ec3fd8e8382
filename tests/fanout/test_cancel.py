"""Cancelling a parent cancels its children: those running (asleep here), those pending
behind ``max_concurrency``, and those its worker is creating at that very moment."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import StoreFaults
from tests.fanout.kit import runtime_on, settle

N = 6


class Parent(BaseModel):
    n: int = N


class Kid(BaseModel):
    i: int


def family_app() -> tuple[Continuum, Counter[str]]:
    app = Continuum()
    ran: Counter[str] = Counter()
    lock = threading.Lock()

    @app.step(effect=True)
    def note(tag: str) -> str:
        with lock:
            ran[tag] += 1
        return tag

    @app.task(state=Kid)
    def kid(ctx: TaskContext[Kid]) -> str:
        note(f"kid {ctx.state.i} began")
        ctx.sleep(3600)
        return note(f"kid {ctx.state.i} ended")

    @app.task(state=Parent)
    def parent(ctx: TaskContext[Parent]) -> Any:
        batch = ctx.map_tasks("kid", [Kid(i=i) for i in range(ctx.state.n)], max_concurrency=2)
        return note(f"parent got {batch.success_count}")

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


@pytest.mark.parametrize("where", ["memory", "moto"])
def test_cancelling_a_waiting_parent_cancels_its_running_and_pending_children(where):
    app, ran = family_app()
    with runtime_on(where, app) as runtime, runtime.time.running():
        task_id = app.client().start("parent", Parent())
        run_visible(runtime)
        assert runtime.record(task_id).status == Status.WAITING
        assert ran == Counter({"kid 0 began": 1, "kid 1 began": 1})  # two asleep, four pending
        app.client().cancel(task_id, "not needed")
        settle(runtime)
        check_all_cancelled(runtime, task_id, ran)


def test_a_cancel_that_arrives_while_the_parent_creates_its_children_cancels_them_all():
    app, ran = family_app()
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
