"""A virtual child context: its steps keyed under its name, no journal entry of its own.

On replay its code runs again and its steps replay from the journal, so a task suspended after
its k-th step ends with the result of one that never stopped, in both flavours.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import Continuum, TaskContext, current_context
from continuum.testing import check_replay_safe
from tests.flavours import FLAVOURS


class Trip(BaseModel):
    city: str = "oslo"
    seen: list[str] = []


def trip_app(flavour: str) -> tuple[Continuum, list[str]]:
    """Task ``trip``: a step, a virtual group of two steps (which changes the state), and a
    step after it that uses what the group returned."""
    app = Continuum()
    ran: list[str] = []

    if flavour == "sync":

        @app.step
        def look(what: str) -> str:
            ran.append(what)
            return what.upper()

        def plan(ctx: TaskContext[Trip], city: str) -> list[str]:
            hotel = look(f"hotel in {city}")
            ctx.state.seen.append(hotel)
            return [hotel, look(f"train to {city}")]

        @app.task(state=Trip)
        def trip(ctx: TaskContext[Trip]) -> list[str]:
            first = look("weather")
            booked = ctx.child_context(plan, ctx.state.city, name="plan", virtual=True)
            return [first, *booked, look(f"pay {len(booked)}"), *ctx.state.seen]

    else:

        @app.step
        async def look(what: str) -> str:
            ran.append(what)
            return what.upper()

        async def plan(ctx: TaskContext[Trip], city: str) -> list[str]:
            hotel = await look(f"hotel in {city}")
            ctx.state.seen.append(hotel)
            return [hotel, await look(f"train to {city}")]

        @app.task(state=Trip)
        async def trip(ctx: TaskContext[Trip]) -> list[str]:
            first = await look("weather")
            booked = await ctx.child_context_async(plan, ctx.state.city, name="plan", virtual=True)
            return [first, *booked, await look(f"pay {len(booked)}"), *ctx.state.seen]

    return app, ran


EXPECTED = ["WEATHER", "HOTEL IN OSLO", "TRAIN TO OSLO", "PAY 2", "HOTEL IN OSLO"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_task_suspended_after_any_step_of_a_virtual_context_ends_the_same(flavour):
    app, _ = trip_app(flavour)
    report = check_replay_safe(app, "trip", {})
    assert report.result == EXPECTED
    assert len(report.runs) == 4
    assert sum(run.suspended for run in report.runs) == 3


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_virtual_context_journals_its_steps_under_its_name_and_no_entry_of_its_own(
    make_runtime, flavour
):
    app, ran = trip_app(flavour)
    runtime = make_runtime(app, budget_s=900)
    summary = runtime.run("trip", {})
    assert summary.status == "succeeded"
    record = runtime.record(summary.task_id)
    assert record.result == EXPECTED
    assert ran == ["weather", "hotel in oslo", "train to oslo", "pay 2"]
    history = record.history[-1] if record.history else None
    assert history is not None
    keys = [step.key for step in history.steps]
    assert keys == ["look#0", "plan#1/look#1", "plan#1/look#2", "look#3"]


def test_a_task_waiting_inside_a_virtual_context_has_no_entry_for_it(make_runtime):
    app = Continuum()
    keys: list[str] = []

    @app.step
    def look(what: str) -> str:
        keys.append(current_context().idempotency_key)
        return what

    def plan(ctx: TaskContext[Trip]) -> str:
        look("hotel")
        ctx.sleep(3600, name="nap")
        return look("train")

    @app.task(state=Trip)
    def trip(ctx: TaskContext[Trip]) -> str:
        return ctx.child_context(plan, name="plan", virtual=True)

    runtime = make_runtime(app, budget_s=900)
    with runtime.time.running():
        task_id = app.client().start("trip", {})
        runtime.invoke_once()
        parked = runtime.record(task_id)
        assert [(e.key, e.kind) for e in parked.journal] == [("look#0", "step"), ("nap#1", "sleep")]
        summary = runtime.drive(task_id)
    assert summary.status == "succeeded"
    assert runtime.record(task_id).result == "train"
    assert [key.split("/", 2)[-1] for key in keys] == ["plan#0/look#0", "plan#0/look#2"]


class Docs(BaseModel):
    docs: list[str] = ["a", "b"]


def keyed_app(flavour: str, *, every_wait: bool) -> tuple[Continuum, list[str], list[str]]:
    """Task ``keyed``: a step keyed ``fetch``, then the same virtual context called once per
    doc: a step keyed ``fetch`` and a sleep named ``nap``; with ``every_wait``, the step fails
    its first attempt (its retry runs in a later invocation, over a replay), and a signal, a
    named callback and a named condition follow. Returns the app, the docs fetched, and the
    idempotency keys each attempt of a virtual context's ``fetch`` saw."""
    app = Continuum()
    fetched: list[str] = []
    keys: list[str] = []
    failed: set[str] = set()

    def fetching(doc: str) -> str:
        fetched.append(doc)
        if doc != "first":
            keys.append(current_context().idempotency_key)
            if every_wait and doc not in failed:
                failed.add(doc)
                raise ValueError(f"{doc} is not ready")
        return doc.upper()

    def more(n: int) -> int:
        return n + 1

    if flavour == "sync":
        fetch = app.step(retries=1, backoff_s=3600)(fetching)
        check = app.step(more)

        def process(c: TaskContext[Docs], doc: str) -> list[object]:
            done: list[object] = [c.step(fetch, doc, key="fetch")]
            c.sleep(60, name="nap")
            if every_wait:
                signal = c.wait_for_signal("go")
                done.append(signal.payload if signal else None)
                done.append(c.create_callback(name="approve").result())
                done.append(
                    c.wait_for_condition(
                        check, initial=0, done=lambda n: n >= 2, delay_s=3600, name="poll"
                    )
                )
            return done

        @app.task(state=Docs)
        def keyed(ctx: TaskContext[Docs]) -> list[object]:
            first = ctx.step(fetch, "first", key="fetch")
            done = [ctx.child_context(process, d, name="p", virtual=True) for d in ctx.state.docs]
            return [first, *done]

    else:

        async def fetching_async(doc: str) -> str:
            return fetching(doc)

        async def more_async(n: int) -> int:
            return more(n)

        fetch = app.step(retries=1, backoff_s=3600, name="fetching")(fetching_async)
        check = app.step(name="more")(more_async)

        async def process(c: TaskContext[Docs], doc: str) -> list[object]:
            done: list[object] = [await c.step_async(fetch, doc, key="fetch")]
            await c.sleep_async(60, name="nap")
            if every_wait:
                signal = await c.wait_for_signal_async("go")
                done.append(signal.payload if signal else None)
                done.append(c.create_callback(name="approve").result())
                done.append(
                    await c.wait_for_condition_async(
                        check, initial=0, done=lambda n: n >= 2, delay_s=3600, name="poll"
                    )
                )
            return done

        @app.task(state=Docs)
        async def keyed(ctx: TaskContext[Docs]) -> list[object]:
            first = await ctx.step_async(fetch, "first", key="fetch")
            done = [
                await ctx.child_context_async(process, d, name="p", virtual=True)
                for d in ctx.state.docs
            ]
            return [first, *done]

    return app, fetched, keys


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_task_suspended_after_any_step_of_a_keyed_virtual_context_called_twice_ends_the_same(
    flavour,
):
    app, _, keys = keyed_app(flavour, every_wait=False)
    report = check_replay_safe(app, "keyed", {})
    assert report.result == ["FIRST", ["A"], ["B"]]
    assert len(report.runs) == 3
    assert {key.split("/", 2)[-1] for key in keys} == {"p#1/fetch", "p#3/fetch"}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_keys_and_wait_names_in_a_virtual_context_called_twice_are_its_own_under_its_path(
    make_runtime, flavour
):
    app, fetched, keys = keyed_app(flavour, every_wait=True)
    runtime = make_runtime(app, budget_s=900)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("keyed", {})
        for payload in (1, 2):
            client.signal(task_id, "go", payload)
        summary = runtime.drive(task_id)
        for _ in range(2):  # each call's callback, answered as it waits for it
            for token in runtime.record(task_id).callbacks:
                client.complete_callback(f"{task_id}.{token}", "yes")
            summary = runtime.drive(task_id)
    assert summary.status == "succeeded", summary
    assert runtime.record(task_id).result == ["FIRST", ["A", 1, "yes", 2], ["B", 2, "yes", 2]]
    assert fetched == ["first", "a", "a", "b", "b"]
    # Each attempt of a call saw the same key (its retry ran over a replay); each call its own.
    scoped = [key.split("/", 2)[-1] for key in keys]
    assert scoped == ["p#1/fetch", "p#1/fetch", "p#9/fetch", "p#9/fetch"]


def test_a_virtual_context_that_gives_one_key_to_two_step_calls_fails_naming_its_path(
    make_runtime,
):
    app = Continuum()

    @app.step
    def fetch(doc: str) -> str:
        return doc

    def process(c: TaskContext[Docs]) -> list[str]:
        return [c.step(fetch, doc, key="fetch") for doc in c.state.docs]

    @app.task(state=Docs)
    def keyed(ctx: TaskContext[Docs]) -> list[str]:
        return ctx.child_context(process, name="p", virtual=True)

    summary = make_runtime(app, budget_s=900).run("keyed", {})
    assert summary.status == "failed"
    assert "key 'p#0/fetch' twice" in (summary.error or "")
