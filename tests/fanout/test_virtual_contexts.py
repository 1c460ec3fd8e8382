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
