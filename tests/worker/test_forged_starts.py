"""Forged or unsigned continuation messages change nothing: a task whose start its parent
controls gets no note and no hint from them (a batch child waiting for room stays as it
was), a task that never ran gets at most one note however many arrive, the note's hint says
what it is (evidence, not proof), and ``resume`` refuses to start a batch child early."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._local.runtime import LocalRuntime
from continuum._ops.client import Client
from continuum._record.continuation import Continuations
from continuum._record.model import TaskRecord
from continuum.errors import ContinuumError
from tests.flavours import FLAVOURS


class Ask(BaseModel):
    title: str = "tides"


def fan_app(flavour: str) -> Continuum:
    """``fan`` maps two ``held`` children one at a time; each waits for a signal."""
    app = Continuum(signing_key="the-workers-key")
    items = [{"title": "a"}, {"title": "b"}]
    if flavour == "sync":

        @app.task(state=Ask)
        def held(ctx: TaskContext[Ask]) -> str:
            ctx.wait_for_signal("go")
            return ctx.state.title

        @app.task(state=Ask)
        def fan(ctx: TaskContext[Ask]) -> list[Any]:
            return ctx.map_tasks("held", items, max_concurrency=1).values()

    else:

        @app.task(state=Ask)
        async def held(ctx: TaskContext[Ask]) -> str:
            await ctx.wait_for_signal_async("go")
            return ctx.state.title

        @app.task(state=Ask)
        async def fan(ctx: TaskContext[Ask]) -> list[Any]:
            return (await ctx.map_tasks_async("held", items, max_concurrency=1)).values()

    return app


def unsigned(app: Continuum) -> Client:
    """A client without the workers' key: what sends a forged message."""
    client = app.client()
    client.continuations = Continuations(client.continuations.queue)
    return client


def drain(runtime: LocalRuntime) -> None:
    """Run invocations until no message waits."""
    while runtime.invoke_once() is not None:
        pass


def children_of(app: Continuum, parent: str) -> list[Any]:
    return [t for t in app.client().tasks() if t.parent == parent]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_forged_start_of_a_child_waiting_for_room_leaves_no_note_and_no_hint(
    make_runtime, flavour
):
    app = fan_app(flavour)
    runtime = make_runtime(app)
    parent = runtime.run("fan", {}).task_id
    drain(runtime)
    waiting = [t.task_id for t in children_of(app, parent) if t.status == Status.PENDING]
    assert len(waiting) == 1
    child = waiting[0]
    unsigned(app).continuations.send(child, generation=0, reason="start")
    drain(runtime)
    assert app.client().status(child).hint is None
    assert app.records.inbox.start_refusal(child) is None
    assert app.client().status(child).status == Status.PENDING


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_resume_of_a_child_its_batch_has_not_started_is_refused_so_max_concurrency_holds(
    make_runtime, flavour
):
    app = fan_app(flavour)
    runtime = make_runtime(app)
    parent = runtime.run("fan", {}).task_id
    drain(runtime)
    child = next(t.task_id for t in children_of(app, parent) if t.status == Status.PENDING)
    with pytest.raises(ContinuumError) as refused:
        app.client().resume(child)
    assert child in str(refused.value)
    assert "starts it when a slot" in str(refused.value)
    assert app.client().resume_pending(older_than_s=0) == []  # the sweep passes it over too
    drain(runtime)
    statuses = sorted(t.status.value for t in children_of(app, parent))
    assert statuses == ["pending", "waiting"]
    # its turn comes when the first finishes: then resume sends its start again, harmlessly
    first = next(t.task_id for t in children_of(app, parent) if t.status == Status.WAITING)
    app.client().signal(first, "go")
    drain(runtime)
    assert app.client().resume(child) == app.client().status(child).generation
    drain(runtime)
    assert app.client().status(child).status == Status.WAITING


def test_many_forged_messages_naming_a_task_that_never_ran_write_one_note(make_runtime):
    app = Continuum(signing_key="the-workers-key")

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> str:
        return ctx.state.title

    runtime = make_runtime(app)
    # a task nobody started yet (a fork before its start is taken, say)
    app.records.create(TaskRecord(task_id="victim", task_name="ask", state={"title": "x"}))
    store = app.records.store
    puts: list[str] = []
    original = store.put

    def counting(key: str, *args: Any, **kwargs: Any) -> Any:
        puts.append(key)
        return original(key, *args, **kwargs)

    store.put = counting  # type: ignore[method-assign]
    try:
        attacker = unsigned(app)
        for i in range(20):
            attacker.continuations.send("victim", generation=0, reason=f"spam {i}")
        drain(runtime)
    finally:
        store.put = original  # type: ignore[method-assign]
    assert [k for k in puts if k.endswith("inbox/refused.json")] == [
        f"{app.records.prefix}/victim/inbox/refused.json"
    ]
    hint = app.client().status("victim").hint
    assert hint is not None
    assert hint.startswith("a message naming this task was refused at ")
    assert "If this task was started by something without the worker's signing key" in hint
    assert hint.endswith("continuum resume victim")


def test_forged_messages_beside_a_signed_start_leave_the_task_as_it_would_be(make_runtime):
    app = Continuum(signing_key="the-workers-key")

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> str:
        return ctx.state.title

    runtime = make_runtime(app)
    task_id = app.client().start("ask", {})
    attacker = unsigned(app)
    for i in range(5):
        attacker.continuations.send(task_id, generation=0, reason=f"x {i}")
    drain(runtime)
    status = app.client().status(task_id)
    assert (status.status, status.hint) == (Status.SUCCEEDED, None)
