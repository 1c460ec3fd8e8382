"""A callback's timeout and a late answer: one of the two wins, and the sender knows which.

Every test runs in both flavours (``tests/waits/flavours.py``): the task ``def``, and
``async def`` awaiting its steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from continuum import CallbackError, CallbackTimeoutError, Continuum, TaskContext
from tests.waits.flavours import Flavour


class Ask(BaseModel):
    timeout_s: float = 600.0


def ask_app(
    flavour: Flavour, body: Callable[[Continuum, dict[str, Any]], str], catch: Callable[[], bool]
) -> tuple[Continuum, dict[str, Any]]:
    """Task ``ask``: wait for a callback, its id handed out in a step; on its timeout, fail
    unless ``catch()``, else run the step ``clean_up``, which returns ``body(app, seen)``."""
    app = Continuum()
    seen: dict[str, Any] = {"ids": [], "cleanups": 0, "late": []}

    @flavour.step(app)
    def hand_out(callback_id: str) -> str:
        seen["ids"].append(callback_id)
        return callback_id

    @flavour.step(app)
    def clean_up() -> str:
        return body(app, seen)

    def ask(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("approval", timeout=ctx.state.timeout_s)
        hand_out(cb.id)
        try:
            return cb.result()
        except CallbackTimeoutError:
            if not catch():
                raise
            return clean_up()

    async def ask_async(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("approval", timeout=ctx.state.timeout_s)
        await hand_out(cb.id)
        try:
            return cb.result()
        except CallbackTimeoutError:
            if not catch():
                raise
            return await clean_up()

    flavour.task(app, ask, ask_async, state=Ask)
    return app, seen


def timing_out_app(flavour: Flavour, fixed: dict[str, bool]) -> tuple[Continuum, dict[str, Any]]:
    """On the callback's timeout, fail (unless ``fixed["catch"]``) or run a cleanup step."""

    def count(app: Continuum, seen: dict[str, Any]) -> str:
        seen["cleanups"] += 1
        return "cleaned up"

    return ask_app(flavour, count, catch=lambda: fixed["catch"])


def test_retry_after_a_fix_that_catches_the_callback_timeout_runs_the_fixed_code(
    make_runtime, flavour
):
    fixed = {"catch": False}
    app, seen = timing_out_app(flavour, fixed)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("ask", {})
        failed = runtime.drive(task_id, stop_when_waiting=False)
        assert failed.status == "failed"
        assert "was not answered before its timeout" in (failed.error or "")
        fixed["catch"] = True  # the fix is deployed
        client.retry(task_id)
        done = runtime.drive(task_id, stop_when_waiting=False)
    assert done.status == "succeeded", done.error
    assert done.result == "cleaned up"
    assert seen["cleanups"] == 1
    assert len(seen["ids"]) == 1  # the callback and its hand-out were not made again


def late_answer_app(flavour: Flavour) -> tuple[Continuum, dict[str, Any]]:
    """On the callback's timeout, a cleanup step runs; inside it (while the turn that took the
    timeout has not saved) the outside world answers the callback."""

    def answer_late(app: Continuum, seen: dict[str, Any]) -> str:
        try:
            app.client().complete_callback(seen["ids"][0], {"approved": True})
        except CallbackError as exc:
            seen["late"].append(exc.message)
            return "refused"
        seen["late"].append("accepted")
        return "accepted"

    return ask_app(flavour, answer_late, catch=lambda: True)


def test_an_answer_sent_after_the_timeout_was_taken_is_refused(make_runtime, flavour):
    app, seen = late_answer_app(flavour)
    runtime = make_runtime(app)
    done = runtime.run("ask", {})
    with runtime.time.running():
        done = runtime.drive(done.task_id, stop_when_waiting=False)
    assert done.status == "succeeded", done.error
    assert done.result == "refused", "an answer the task never took was accepted"
    assert "timed out" in seen["late"][0]


def test_an_answer_that_lands_before_the_timeout_is_taken_wins_over_it(make_runtime, flavour):
    app, seen = timing_out_app(flavour, {"catch": True})
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("ask", {})
        assert runtime.drive(task_id).status == "waiting"
        runtime.time.advance(601)  # past the timeout; its timer is due, not yet handled
        client.complete_callback(seen["ids"][0], {"approved": True})  # late, but first
        done = runtime.drive(task_id, stop_when_waiting=False)
    assert done.status == "succeeded", done.error
    assert done.result == {"approved": True}
    assert seen["cleanups"] == 0
