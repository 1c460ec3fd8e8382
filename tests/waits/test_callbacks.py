"""Callbacks: a task hands out an id, waits without compute, and takes the one answer.

The tests whose task waits run in both flavours (``tests/waits/flavours.py``): the task ``def``,
and ``async def`` with awaited steps, ``cb.result()`` and ``await ctx.wait_for_callback_async``.
The client's refusals of unknown ids and of results it cannot store run with the sync task.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from continuum import (
    CallbackError,
    CallbackTimeoutError,
    Continuum,
    PayloadTooLargeError,
    Status,
    TaskContext,
    UnserializableValueError,
    WaitKind,
)
from tests.waits.flavours import Flavour


class Ask(BaseModel):
    timeout_s: float | None = 3600.0
    heartbeat_s: float | None = None
    catch: bool = False


def approval_app(flavour: Flavour = Flavour("sync")) -> tuple[Continuum, dict[str, Any]]:
    """Task ``ask``: create a callback, hand its id out (a step), return its result."""
    app = Continuum()
    seen: dict[str, Any] = {"ids": [], "published": 0}

    @flavour.step(app)
    def hand_out(callback_id: str) -> str:
        seen["ids"].append(callback_id)
        return callback_id

    @flavour.step(app)
    def publish(decision: Any) -> str:
        seen["published"] += 1
        return f"published {decision}"

    def ask(ctx: TaskContext[Ask]) -> str:
        s = ctx.state
        cb = ctx.create_callback("approval", timeout=s.timeout_s, heartbeat_timeout=s.heartbeat_s)
        hand_out(cb.id)
        try:
            decision = cb.result()
        except CallbackTimeoutError as exc:
            if not s.catch:
                raise
            return f"gave up: {exc.message}"
        return publish(decision)

    async def ask_async(ctx: TaskContext[Ask]) -> str:
        s = ctx.state
        cb = ctx.create_callback("approval", timeout=s.timeout_s, heartbeat_timeout=s.heartbeat_s)
        await hand_out(cb.id)
        try:
            decision = cb.result()
        except CallbackTimeoutError as exc:
            if not s.catch:
                raise
            return f"gave up: {exc.message}"
        return await publish(decision)

    flavour.task(app, ask, ask_async, state=Ask)
    return app, seen


def test_a_completed_callback_resumes_the_task_with_its_result(make_runtime, flavour):
    app, seen = approval_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("ask", {})
        assert waiting.status == "waiting"
        invocations = waiting.invocations
        status = client.status(waiting.task_id)
        [waiter] = status.waiting_for
        assert waiter.kind == WaitKind.CALLBACK
        assert waiter.id == seen["ids"][0]
        assert waiter.deadline is not None
        runtime.time.advance(600)  # ten minutes pass with no invocation (no timer due yet)
        assert runtime.invoke_once() is None
        client.complete_callback(seen["ids"][0], {"approved": True})
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded"
    assert done.result == "published {'approved': True}"
    assert done.invocations == invocations + 1  # the wake; nothing ran while it waited
    assert seen["published"] == 1
    assert len(seen["ids"]) == 1
    assert client.status(done.task_id).waiting_for == []


def test_a_failed_callback_raises_callback_failed_error_with_its_type(make_runtime, flavour):
    app, seen = approval_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("ask", {})
        app.client().fail_callback(seen["ids"][0], "Rejected", "not this week")
        done = runtime.drive(waiting.task_id)
    record = runtime.record(done.task_id)
    assert done.status == "failed"
    assert record.error.type == "CallbackFailedError"
    assert "not this week" in record.error.message
    assert seen["published"] == 0


def test_a_callback_that_times_out_fails_the_task_unless_it_catches_the_timeout(
    make_runtime, flavour
):
    app, seen = approval_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        first = runtime.drive(
            runtime.run("ask", {"timeout_s": 600}).task_id, stop_when_waiting=False
        )
        caught = runtime.run("ask", {"timeout_s": 600, "catch": True})
        caught = runtime.drive(caught.task_id, stop_when_waiting=False)
    assert first.status == "failed"
    assert runtime.record(first.task_id).error.type == "CallbackTimeoutError"
    assert caught.status == "succeeded"
    assert caught.result.startswith("gave up: callback 'approval' was not answered")
    assert seen["published"] == 0


def test_heartbeats_keep_a_callback_alive_and_their_absence_times_it_out(make_runtime, flavour):
    app, seen = approval_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("ask", {"timeout_s": None, "heartbeat_s": 60, "catch": True})
        callback_id = seen["ids"][0]
        for _ in range(4):  # a heartbeat every 40 s keeps it alive for 160 s
            runtime.time.advance(40)
            client.heartbeat_callback(callback_id)
            assert runtime.drive(waiting.task_id).status == "waiting"
        runtime.time.advance(30)
        assert runtime.drive(waiting.task_id).status == "waiting"
        done = runtime.drive(waiting.task_id, stop_when_waiting=False)  # heartbeats stop
    assert done.status == "succeeded"
    assert done.result == "gave up: callback 'approval' had no heartbeat for 60s"


def test_two_callbacks_awaited_in_the_reverse_order_of_their_answers(make_runtime, flavour):
    app = Continuum()
    ids: list[str] = []

    @flavour.step(app)
    def hand_out(callback_id: str) -> None:
        ids.append(callback_id)

    def both(ctx: TaskContext[Ask]) -> list[Any]:
        first = ctx.create_callback("first")
        second = ctx.create_callback("second")
        hand_out(first.id)
        hand_out(second.id)
        later = second.result()
        return [first.result(), later]

    async def both_async(ctx: TaskContext[Ask]) -> list[Any]:
        first = ctx.create_callback("first")
        second = ctx.create_callback("second")
        await hand_out(first.id)
        await hand_out(second.id)
        later = second.result()
        return [first.result(), later]

    flavour.task(app, both, both_async, state=Ask)

    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("both", {})
        client.complete_callback(ids[0], "one")  # answered first, awaited second
        assert runtime.drive(waiting.task_id).status == "waiting"
        client.complete_callback(ids[1], "two")
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded"
    assert done.result == ["one", "two"]


def test_wait_for_callback_retries_its_submitter_and_an_answer_from_inside_it_is_kept(
    make_runtime, flavour
):
    app = Continuum()
    attempts: list[str] = []

    def submit_with(client: Any, callback_id: str) -> None:
        attempts.append(callback_id)
        if len(attempts) == 1:
            raise ConnectionError("the mail server hung up")
        # Answered at once, from inside the submitter: the id is already saved.
        client.complete_callback(callback_id, "fast")

    def submitted(ctx: TaskContext[Ask]) -> Any:
        client = app.client()

        def submit(callback_id: str) -> None:
            submit_with(client, callback_id)

        return ctx.wait_for_callback(submit, name="review", retries=2, backoff_s=0.01)

    async def submitted_async(ctx: TaskContext[Ask]) -> Any:
        client = app.client()

        async def submit(callback_id: str) -> None:
            submit_with(client, callback_id)

        return await ctx.wait_for_callback_async(submit, name="review", retries=2, backoff_s=0.01)

    flavour.task(app, submitted, submitted_async, state=Ask)

    runtime = make_runtime(app)
    done = runtime.run("submitted", {})
    assert done.status == "succeeded"
    assert done.result == "fast"
    assert len(attempts) == 2
    assert len(set(attempts)) == 1


def test_a_second_answer_is_refused_and_the_task_keeps_the_first(make_runtime, flavour):
    app, seen = approval_app(flavour)
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("ask", {})
        client.complete_callback(seen["ids"][0], "yes")
        for again in (
            lambda: client.complete_callback(seen["ids"][0], "no"),
            lambda: client.fail_callback(seen["ids"][0], "Late", "too late"),
        ):
            with pytest.raises(CallbackError, match="already answered"):
                again()
        done = runtime.drive(waiting.task_id)
        with pytest.raises(CallbackError, match="succeeded"):
            client.complete_callback(seen["ids"][0], "after the end")
    assert done.result == "published yes"


def test_unknown_forged_and_foreign_callback_ids_are_refused_and_write_nothing(make_runtime):
    app, seen = approval_app()
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        a = runtime.run("ask", {})
        b = runtime.run("ask", {})
        before = sorted(runtime.observer_store.list_keys(""))
        real_a, real_b = seen["ids"]
        token_b = real_b.rsplit(".", 1)[1]
        for bad in (
            "nonsense",
            f"{a.task_id}.{'0' * 32}",  # a well-formed id the task never made
            f"{a.task_id}.{token_b}",  # task b's token on task a
            f"no-such-task.{token_b}",
            f"../{real_a}",
            real_a + "0",
        ):
            with pytest.raises(CallbackError, match="unknown callback id"):
                client.complete_callback(bad, "x")
        assert sorted(runtime.observer_store.list_keys("")) == before
        client.complete_callback(real_a, "only a")
        assert runtime.drive(a.task_id).result == "published only a"
        assert runtime.record(b.task_id).status == Status.WAITING


def test_a_result_json_cannot_hold_or_over_the_limit_is_refused(make_runtime):
    app, seen = approval_app()
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("ask", {})
        with pytest.raises(UnserializableValueError, match="NaN"):
            client.complete_callback(seen["ids"][0], {"score": float("nan")})
        with pytest.raises(UnserializableValueError):
            client.complete_callback(seen["ids"][0], object())
        with pytest.raises(PayloadTooLargeError, match="callback result"):
            client.complete_callback(seen["ids"][0], "x" * 300_000)
        client.complete_callback(seen["ids"][0], "fine")  # nothing above was written
        assert runtime.drive(waiting.task_id).result == "published fine"
