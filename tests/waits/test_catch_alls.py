"""A task's ``except Exception`` cannot swallow a wait or a suspension: they are not Exceptions.
It can catch a cancel (``TaskCancelledError`` is one, to run cleanup), and the task still ends
cancelled. A catch-all (a bare ``except:``, ``except BaseException:``) that swallows a wait or
a suspension fails the task saying so, rather than saving what the code did instead.

Every test runs in both flavours (``tests/waits/flavours.py``): the task ``def``, and
``async def`` with the ``_async`` waits and awaited steps.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.waits.flavours import Flavour


class Empty(BaseModel):
    pass


def patient_app(flavour: Flavour) -> tuple[Continuum, dict[str, Any]]:
    """Task ``patient``: each wait inside ``try: ... except Exception``: a sleep, a callback, a
    signal, a condition."""
    app = Continuum()
    seen: dict[str, Any] = {"caught": [], "ids": []}

    @flavour.step(app)
    def hand_out(callback_id: str) -> None:
        seen["ids"].append(callback_id)

    @flavour.step(app)
    def probe(n: int) -> int:
        return n + 1

    def patient(ctx: TaskContext[Empty]) -> list[Any]:
        got: list[Any] = []
        try:
            ctx.sleep(3600)
            got.append("slept")
        except Exception as exc:
            seen["caught"].append(exc)
        try:
            got.append(ctx.wait_for_callback(hand_out, name="answer", timeout=3600))
        except Exception as exc:
            seen["caught"].append(exc)
        try:
            signal = ctx.wait_for_signal("go", timeout=3600)
            got.append(signal.payload if signal else None)
        except Exception as exc:
            seen["caught"].append(exc)
        try:
            got.append(ctx.wait_for_condition(probe, initial=0, done=lambda n: n >= 3, delay_s=60))
        except Exception as exc:
            seen["caught"].append(exc)
        return got

    async def patient_async(ctx: TaskContext[Empty]) -> list[Any]:
        got: list[Any] = []
        try:
            await ctx.sleep_async(3600)
            got.append("slept")
        except Exception as exc:
            seen["caught"].append(exc)
        try:
            got.append(await ctx.wait_for_callback_async(hand_out, name="answer", timeout=3600))
        except Exception as exc:
            seen["caught"].append(exc)
        try:
            signal = await ctx.wait_for_signal_async("go", timeout=3600)
            got.append(signal.payload if signal else None)
        except Exception as exc:
            seen["caught"].append(exc)
        try:
            got.append(
                await ctx.wait_for_condition_async(
                    probe, initial=0, done=lambda n: n >= 3, delay_s=60
                )
            )
        except Exception as exc:
            seen["caught"].append(exc)
        return got

    flavour.task(app, patient, patient_async, state=Empty)
    return app, seen


def test_except_exception_lets_every_wait_through(make_runtime, flavour):
    app, seen = patient_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("patient", {})  # slept its hour; waits for the answer
        assert waiting.status == "waiting", waiting.error
        client.complete_callback(seen["ids"][0], "yes")
        assert runtime.drive(waiting.task_id).status == "waiting"  # for the signal
        client.signal(waiting.task_id, "go", "now")
        done = runtime.drive(waiting.task_id, stop_when_waiting=False)
    assert seen["caught"] == []
    assert done.status == "succeeded", done.error
    assert done.result == ["slept", "yes", "now", 3]
    assert runtime.record(done.task_id).counters.waits >= 4


def test_except_exception_lets_a_suspension_through(make_runtime, flavour):
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)
    ran: list[int] = []
    caught: list[Exception] = []

    @flavour.step(app)
    def work(i: int) -> int:
        ran.append(i)
        time.sleep(0.05)
        return i

    def busy(ctx: TaskContext[Empty]) -> list[int]:
        done = []
        for i in range(8):
            try:
                done.append(work(i))
            except Exception as exc:
                caught.append(exc)
        return done

    async def busy_async(ctx: TaskContext[Empty]) -> list[int]:
        done = []
        for i in range(8):
            try:
                done.append(await work(i))
            except Exception as exc:
                caught.append(exc)
        return done

    flavour.task(app, busy, busy_async, state=Empty)
    runtime = make_runtime(app, budget_s=0.3)
    summary = runtime.run("busy", {})
    assert caught == []
    assert summary.status == "succeeded", summary.error
    assert summary.result == list(range(8))
    assert ran == list(range(8))  # each step once
    assert summary.continuations >= 2  # the steps spanned invocations


def test_except_exception_that_takes_the_cancel_still_ends_cancelled(make_runtime, flavour):
    app = Continuum()
    caught: list[str] = []

    def stubborn(ctx: TaskContext[Empty]) -> str:
        try:
            ctx.wait_for_signal("never")
        except Exception as exc:
            caught.append(type(exc).__name__)
        return "carried on"

    async def stubborn_async(ctx: TaskContext[Empty]) -> str:
        try:
            await ctx.wait_for_signal_async("never")
        except Exception as exc:
            caught.append(type(exc).__name__)
        return "carried on"

    flavour.task(app, stubborn, stubborn_async, state=Empty)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("stubborn", {})
        assert waiting.status == "waiting"
        app.client().cancel(waiting.task_id, "stop")
        done = runtime.drive(waiting.task_id)
    assert caught == ["TaskCancelledError"]
    assert done.status == "cancelled"
    assert done.result is None


class Careless(BaseModel):
    what: str = "wait"


def careless_app(flavour: Flavour) -> tuple[Continuum, list[str]]:
    """Task ``careless``: a bare ``except:`` around a sleep of an hour (``what="wait"``) or
    around a step that does not fit in the invocation (``"suspension"``), with a fallback."""
    app = Continuum(default_step_s=0.05, safety_margin_s=0.05)
    ran: list[str] = []

    @flavour.step(app)
    def slow(i: int) -> int:
        ran.append(f"slow {i}")
        time.sleep(0.2)
        return i

    def careless(ctx: TaskContext[Careless]) -> str:
        slow(0)
        try:
            if ctx.state.what == "wait":
                ctx.sleep(3600)
            else:
                slow(1)
        except:  # noqa: E722 - the point of the test
            return "fallback"
        return "through"

    async def careless_async(ctx: TaskContext[Careless]) -> str:
        await slow(0)
        try:
            if ctx.state.what == "wait":
                await ctx.sleep_async(3600)
            else:
                await slow(1)
        except:  # noqa: E722 - the point of the test
            return "fallback"
        return "through"

    flavour.task(app, careless, careless_async, state=Careless)
    return app, ran


@pytest.mark.parametrize(("what", "kind"), [("wait", "Wait"), ("suspension", "Suspend")])
def test_a_bare_except_that_swallows_a_wait_or_suspension_fails_the_task_saying_so(
    make_runtime, flavour, what, kind
):
    app, ran = careless_app(flavour)
    runtime = make_runtime(app, budget_s=0.3)  # room for one slow step, not two
    summary = runtime.run("careless", {"what": what})
    assert summary.result != "fallback", "the swallowed control flow's fallback was saved"
    assert summary.status == "failed"
    record = runtime.record(summary.task_id)
    assert record.status == Status.FAILED
    assert record.error.type == "ControlFlowSwallowed"
    assert f"caught continuum's {kind} exception" in record.error.message
    assert re.search(r"bare `except:`", record.error.message)
    assert ran == ["slow 0"]  # the step after the catch-all's try never ran
