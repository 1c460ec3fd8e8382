"""What the record durably holds, told as it changes, and each context function's run.

``operations_saved``: after each write of the record that changed what its journal holds (and
at the write that ends the invocation), the observers hear which operations changed (a
step's, a wait's or a context's new status, with its id, name, kind, parent, times, error and
attempt) and every operation the record holds then; the changed are always among them. A
step that succeeded is told so once, never failed; a replay tells nothing again.

``context_entered``: each run of a child context's function (a block, a batch's branch or
item), live or replayed, with whether it re-runs to replay children it recorded before.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Observer, StepError, TaskContext
from continuum._define.events import ContextEnded, ContextEntered, OperationsSaved, WaitStarted
from tests.flavours import FLAVOURS
from tests.observers.recorder import Recorder

HOUR = 3600


class Empty(BaseModel):
    pass


class Saved(Observer):
    def __init__(self) -> None:
        self.saves: list[OperationsSaved] = []
        self.entered: list[ContextEntered] = []

    def operations_saved(self, event: OperationsSaved) -> None:
        self.saves.append(event)

    def context_entered(self, event: ContextEntered) -> None:
        self.entered.append(event)

    def changes(self) -> list[tuple[str, str]]:
        return [(op.id, op.status) for save in self.saves for op in save.updated]


def greeting_app(flavour: str) -> tuple[Continuum, Saved]:
    app, seen = Continuum(), Saved()
    app.observe(seen)
    if flavour == "sync":

        @app.step
        def greet(name: str) -> str:
            return f"Hello, {name}!"

        @app.task(state=Empty)
        def hello(ctx: TaskContext[Empty]) -> str:
            return greet("Ada")

    else:

        @app.step
        async def greet(name: str) -> str:
            return f"Hello, {name}!"

        @app.task(state=Empty)
        async def hello(ctx: TaskContext[Empty]) -> str:
            return await greet("Ada")

    return app, seen


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_that_succeeded_is_told_saved_once_with_its_whole_item(flavour, make_runtime):
    app, seen = greeting_app(flavour)
    summary = make_runtime(app).run("hello", {})
    assert summary.status == "succeeded"
    assert seen.changes().count(("greet#0", "succeeded")) == 1
    assert ("greet#0", "failed") not in seen.changes()
    (save,) = [s for s in seen.saves if any(op.id == "greet#0" for op in s.updated)]
    (op,) = [op for op in save.updated if op.id == "greet#0"]
    assert (op.name, op.kind, op.parent_id, op.attempt, op.error) == (
        "greet",
        "step",
        None,
        1,
        None,
    )
    assert op.started_at is not None
    assert op.ended_at is not None
    assert op.started_at <= op.ended_at
    assert op.replay is False
    assert {o.id for o in save.updated} <= {o.id for o in save.operations}
    assert save.task_id == summary.task_id
    assert save.request_id


def trip_app(flavour: str, *before: Observer) -> tuple[Continuum, Saved]:
    """A step, a block holding a step, a step retried after an hour's backoff (the task
    parks), then an hour's sleep (it parks again). ``before``: observers registered first."""
    app, seen = Continuum(), Saved()
    for observer in before:
        app.observe(observer)
    app.observe(seen)
    calls: Counter[str] = Counter()
    if flavour == "sync":

        @app.step
        def look(what: str) -> str:
            return what.upper()

        @app.step(retries=1, backoff_s=HOUR)
        def flaky() -> str:
            calls["flaky"] += 1
            if calls["flaky"] == 1:
                raise ConnectionError("down")
            return "up"

        @app.task(state=Empty)
        def trip(ctx: TaskContext[Empty]) -> list[str]:
            done = [look("a"), ctx.child_context(lambda c: look("b"), name="block"), flaky()]
            ctx.sleep(HOUR, name="nap")
            return done

    else:

        @app.step
        async def look(what: str) -> str:
            return what.upper()

        @app.step(retries=1, backoff_s=HOUR)
        async def flaky() -> str:
            calls["flaky"] += 1
            if calls["flaky"] == 1:
                raise ConnectionError("down")
            return "up"

        async def block(ctx: TaskContext[Empty]) -> str:
            return await look("b")

        @app.task(state=Empty)
        async def trip(ctx: TaskContext[Empty]) -> list[str]:
            done = [await look("a"), await ctx.child_context_async(block, name="block")]
            done.append(await flaky())
            await ctx.sleep_async(HOUR, name="nap")
            return done

    return app, seen


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_each_change_of_an_operation_is_told_once_across_invocations(flavour, make_runtime):
    app, seen = trip_app(flavour)
    summary = make_runtime(app).run("trip", {})
    assert summary.status == "succeeded"
    changes = seen.changes()
    assert Counter(changes) == Counter(set(changes)), changes  # nothing told twice
    assert [c for c in changes if c[0] == "flaky#2"] == [
        ("flaky#2", "pending"),  # its first attempt failed; the retry waits for the backoff
        ("flaky#2", "succeeded"),
    ]
    assert [c for c in changes if c[0] == "nap#3"] == [("nap#3", "started"), ("nap#3", "succeeded")]
    assert ("look#0", "succeeded") in changes
    assert ("block#1", "succeeded") in changes
    # a block that finished before a write is held as its result, without its children
    assert not [c for c in changes if c[0].startswith("block#1/")]
    ops = {op.id: op for save in seen.saves for op in save.updated}
    assert ops["block#1"].kind == "context"
    assert ops["nap#3"].kind == "sleep"
    assert ops["flaky#2"].attempt == 2
    # requests: the first save of each invocation names that invocation's Lambda request
    assert len({save.request_id for save in seen.saves}) == 3
    for save in seen.saves:
        assert {o.id for o in save.updated} <= {o.id for o in save.operations}
    # what the second invocation replayed (reached in the first) says so
    assert [op.replay for save in seen.saves for op in save.updated if op.id == "nap#3"] == [
        False,
        True,
    ]


def branches_app(flavour: str) -> tuple[Continuum, Saved]:
    """A parallel of two named branches, one at a time: branch-a runs a step and sleeps two
    seconds (past what the invocation waits inline), branch-b returns."""
    app, seen = Continuum(), Saved()
    app.observe(seen)
    if flavour == "sync":

        @app.step
        def inner() -> str:
            return "x"

        def branch_a(ctx: TaskContext[Empty]) -> str:
            inner()
            ctx.sleep(HOUR, name="pause")
            return "a-done"

        @app.task(state=Empty)
        def both(ctx: TaskContext[Empty]) -> list[str]:
            branches = {"branch-a": branch_a, "branch-b": lambda c: "b-done"}
            return ctx.parallel(branches, name="ctx", max_concurrency=1).values()

    else:

        @app.step
        async def inner() -> str:
            return "x"

        async def branch_a(ctx: TaskContext[Empty]) -> str:
            await inner()
            await ctx.sleep_async(HOUR, name="pause")
            return "a-done"

        async def branch_b(ctx: TaskContext[Empty]) -> str:
            return "b-done"

        @app.task(state=Empty)
        async def both(ctx: TaskContext[Empty]) -> list[str]:
            branches = {"branch-a": branch_a, "branch-b": branch_b}
            batch = await ctx.parallel_async(branches, name="ctx", max_concurrency=1)
            return batch.values()

    return app, seen


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_each_run_of_a_context_function_says_whether_it_replays_children(flavour, make_runtime):
    app, seen = branches_app(flavour)
    summary = make_runtime(app).run("both", {})
    assert summary.status == "succeeded"
    runs = [(e.name, e.kind, e.replaying_children) for e in seen.entered]
    assert runs == [
        ("branch-a", "item", False),  # live, first invocation: it parks in its sleep
        ("branch-b", "item", False),  # the slot is free while branch-a waits: it runs, ends
        ("branch-a", "item", True),  # re-run after the sleep: its step and its sleep replay
    ]
    assert [e.index for e in seen.entered] == [0, 1, 0]
    assert all(e.path.startswith("ctx#0/") for e in seen.entered)
    ops = {op.id: op for save in seen.saves for op in save.updated}
    assert ops["ctx#0"].kind == "batch"
    assert ops["ctx#0/0"].name == "branch-a"
    assert ops["ctx#0/0"].parent_id == "ctx#0"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_block_entered_again_replays_its_children(flavour, make_runtime):
    app, seen = Continuum(), Saved()
    app.observe(seen)

    if flavour == "sync":

        @app.step
        def look() -> str:
            return "x"

        def block(ctx: TaskContext[Empty]) -> str:
            look()
            ctx.sleep(HOUR, name="pause")
            return "done"

        @app.task(state=Empty)
        def once(ctx: TaskContext[Empty]) -> str:
            return ctx.child_context(block, name="block")

    else:

        @app.step
        async def look() -> str:
            return "x"

        async def block(ctx: TaskContext[Empty]) -> str:
            await look()
            await ctx.sleep_async(HOUR, name="pause")
            return "done"

        @app.task(state=Empty)
        async def once(ctx: TaskContext[Empty]) -> str:
            return await ctx.child_context_async(block, name="block")

    assert make_runtime(app).run("once", {}).status == "succeeded"
    runs = [(e.name, e.kind, e.replaying_children, e.index) for e in seen.entered]
    assert runs == [("block", "context", False, None), ("block", "context", True, None)]


def test_no_list_of_operations_is_kept_unless_an_observer_wants_one(make_runtime, monkeypatch):
    import continuum._worker.saved_operations as saved_operations

    made: list[object] = []

    class Counted(saved_operations.SavedOperations):
        def __init__(self, *args: Any) -> None:
            made.append(self)
            super().__init__(*args)

    monkeypatch.setattr(saved_operations, "SavedOperations", Counted)

    class StepsOnly(Observer):
        def step_ended(self, event: Any) -> None: ...

    app, _seen = greeting_app("sync")
    app.observe(StepsOnly())
    assert make_runtime(app).run("hello", {}).status == "succeeded"
    assert len(made) == 1  # the one invocation, for the observer that wants the event

    plain = Continuum()
    plain.observe(StepsOnly())

    @plain.step
    def greet() -> str:
        return "hi"

    @plain.task(state=Empty)
    def hello(ctx: TaskContext[Empty]) -> str:
        return greet()

    assert make_runtime(plain).run("hello", {}).status == "succeeded"
    assert len(made) == 1  # none for an app whose observers do not want it


class Count(BaseModel):
    n: int = 0


def test_a_failed_step_is_saved_with_when_it_started_and_ended(make_runtime):
    app, seen = Continuum(), Saved()
    app.observe(seen)

    @app.step
    def look() -> int:
        raise ValueError("no")

    @app.task(state=Empty)
    def once(ctx: TaskContext[Empty]) -> int:
        with contextlib.suppress(StepError):
            look()
        ctx.sleep(HOUR, name="nap")
        return 1

    assert make_runtime(app).run("once", {}).status == "succeeded"
    (op,) = [op for save in seen.saves for op in save.updated if op.id == "look#0"]
    assert (op.status, op.error_type, op.error) == ("failed", "ValueError", "no")
    assert op.started_at is not None
    assert op.ended_at is not None
    assert op.started_at <= op.ended_at


def test_turns_that_ended_before_one_write_are_told_apart_by_their_turn(make_runtime):
    """Three turns each call ``look`` (the first fails, caught) before any write: three
    operations ``look#0``, one a turn, each among those the write holds."""
    app, seen = Continuum(), Saved()
    app.observe(seen)

    @app.step
    def look(n: int) -> int:
        if n == 0:
            raise ValueError("first look fails")
        return n

    @app.task(state=Count)
    def loop(ctx: TaskContext[Count]) -> int | None:
        with contextlib.suppress(StepError):
            look(ctx.state.n)
        ctx.state.n += 1
        return ctx.state.n if ctx.state.n == 3 else None

    assert make_runtime(app).run("loop", {}).status == "succeeded"
    told = [(op.turn, op.id, op.status) for save in seen.saves for op in save.updated]
    assert told == [(0, "look#0", "failed"), (1, "look#0", "succeeded"), (2, "look#0", "succeeded")]
    for save in seen.saves:
        held = {(op.turn, op.id): op for op in save.operations}
        assert len(held) == len(save.operations)
        assert all(held[op.turn, op.id] == op for op in save.updated)


def test_a_virtual_context_replayed_in_a_later_invocation_began_when_it_first_ran(make_runtime):
    app, seen = Continuum(), Recorder()
    app.observe(seen)

    @app.step
    def look() -> int:
        return 1

    def inner(c: TaskContext[Empty]) -> int:
        look()
        c.sleep(HOUR, name="rest")
        return look()

    @app.task(state=Empty)
    def trip(ctx: TaskContext[Empty]) -> int:
        return ctx.child_context(inner, name="grp", virtual=True)

    assert make_runtime(app).run("trip", {}).status == "succeeded"
    (wait,) = seen.of(WaitStarted)
    (group,) = [e for e in seen.of(ContextEnded) if e.virtual]
    assert group.replay
    assert group.started_at <= wait.started_at  # it holds the wait it ran, an hour long
    assert group.ended_at - group.started_at >= HOUR


def test_a_step_retried_in_a_later_invocation_began_with_its_first_attempt(make_runtime):
    app, seen = trip_app("sync")
    assert make_runtime(app).run("trip", {}).status == "succeeded"
    told = [op for save in seen.saves for op in save.updated if op.id == "flaky#2"]
    assert [(op.status, op.attempt, op.replay) for op in told] == [
        ("pending", 1, False),
        ("succeeded", 2, True),
    ]
    assert told[0].started_at == told[1].started_at  # its first attempt's start, both times


def test_the_asyncio_tasks_of_an_async_turn_are_saved_ended(make_runtime):
    import asyncio

    app, seen = Continuum(), Saved()
    app.observe(seen)

    @app.step
    async def kb(q: str) -> str:
        return q

    @app.task(state=Empty)
    async def both(ctx: TaskContext[Empty]) -> list[str]:
        return list(await asyncio.gather(kb("a"), kb("b")))

    assert make_runtime(app).run("both", {}).status == "succeeded"
    held = {(op.id, op.kind, op.status) for op in seen.saves[-1].operations}
    assert held == {
        ("kb#0", "context", "ended"),
        ("kb#0/kb#0", "step", "succeeded"),
        ("kb#1", "context", "ended"),
        ("kb#1/kb#0", "step", "succeeded"),
    }
