"""A callback says what it asks: its request is shown wherever the callback is, and an answer
that does not fit the shape the request declares is refused at once, with nothing written.

The tests of what the task's callbacks show run in both flavours (``tests/waits/flavours.py``):
the task ``def``, and ``async def`` with ``await ctx.wait_for_callback_async``. The client's
refusals of answers of another shape, the old record and the test runner's ready answers run
with the sync task.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import CallbackError, Continuum, ContinuumError, Status, TaskContext
from continuum._record.model import TaskRecord
from continuum._worker.wake import waiting_for
from tests.waits.flavours import Flavour

#: What an answer to the sample's callback must be: a decision, and a reason when it is no.
EXPECTS = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"ok": {"const": True}},
            "required": ["ok"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"ok": {"const": False}, "reason": {"type": "string"}},
            "required": ["ok", "reason"],
            "additionalProperties": False,
        },
    ]
}
ANSWERS = {"yes": {"ok": True}, "no": {"ok": False, "reason": "not now"}}


class Publish(BaseModel):
    title: str
    shaped: bool = True


def review_app(flavour: Flavour = Flavour("sync")) -> tuple[Continuum, list[str]]:
    app = Continuum()
    ids: list[str] = []

    @flavour.step(app)
    def hand_out(callback_id: str) -> None:
        ids.append(callback_id)

    def asks_of(state: Publish) -> dict[str, Any]:
        asks: dict[str, Any] = {"title": state.title}
        if state.shaped:
            asks |= {"expects": EXPECTS, "answers": ANSWERS}
        return asks

    def review(ctx: TaskContext[Publish]) -> Any:
        asks = asks_of(ctx.state)
        return ctx.wait_for_callback(hand_out, name="review", timeout=3600, request=asks)

    async def review_async(ctx: TaskContext[Publish]) -> Any:
        asks = asks_of(ctx.state)
        return await ctx.wait_for_callback_async(
            hand_out, name="review", timeout=3600, request=asks
        )

    flavour.task(app, review, review_async, state=Publish)
    return app, ids


def test_a_waiting_callback_shows_its_request_in_the_status(make_runtime, flavour):
    app, ids = review_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("review", {"title": "tides"})
        [waiter] = app.client().status(waiting.task_id).waiting_for
    assert waiter.id == ids[0]
    assert waiter.request == {"title": "tides", "expects": EXPECTS, "answers": ANSWERS}
    assert json.loads(app.client().status(waiting.task_id).model_dump_json())["waiting_for"][0][
        "request"
    ] == {"title": "tides", "expects": EXPECTS, "answers": ANSWERS}


def test_an_open_callback_not_yet_awaited_shows_its_request_too(make_runtime, flavour):
    app = Continuum()

    def two(ctx: TaskContext[Publish]) -> Any:
        first = ctx.create_callback("first", request={"which": 1})
        ctx.create_callback("second", request=lambda callback_id: {"id": callback_id})
        return first.result()

    async def two_async(ctx: TaskContext[Publish]) -> Any:
        first = ctx.create_callback("first", request={"which": 1})
        ctx.create_callback("second", request=lambda callback_id: {"id": callback_id})
        return first.result()

    flavour.task(app, two, two_async, state=Publish)

    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("two", {"title": "x"})
        found = {w.name: w for w in app.client().status(waiting.task_id).waiting_for}
    assert found["first"].request == {"which": 1}
    assert found["second"].request == {"id": found["second"].id}


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (None, "answer must be object, got null"),
        ({"ok": "yes"}, 'answer.ok must be true, got "yes"'),
        ({"ok": False}, "answer lacks 'reason'"),
        ({"ok": True, "extra": 1}, "answer has 'extra', which it may not have"),
    ],
)
def test_an_answer_of_another_shape_is_refused_saying_what_is_expected(make_runtime, answer, why):
    app, ids = review_app()
    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        waiting = runtime.run("review", {"title": "tides"})
        before = sorted(runtime.observer_store.list_keys(""))
        with pytest.raises(CallbackError) as refused:
            client.complete_callback(ids[0], answer)
        assert sorted(runtime.observer_store.list_keys("")) == before  # nothing written
        assert runtime.invoke_once() is None  # and nothing woke the task
        client.complete_callback(ids[0], ANSWERS["no"])
        done = runtime.drive(waiting.task_id)
    message = str(refused.value)
    assert "callback 'review' does not take this answer" in message
    assert why in message
    assert '{"ok": true}' in message  # the answers it would take
    assert waiting.task_id in message
    assert done.result == ANSWERS["no"]


def test_a_callback_without_a_declared_shape_takes_any_json(make_runtime, flavour):
    app, ids = review_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("review", {"title": "tides", "shaped": False})
        app.client().complete_callback(ids[0], [1, "anything"])
        assert runtime.drive(waiting.task_id).result == [1, "anything"]


def test_a_request_json_cannot_hold_or_too_large_fails_the_task_naming_the_callback(
    make_runtime, flavour
):
    app = Continuum()

    def big(ctx: TaskContext[Publish]) -> Any:
        asks = {"body": "x" * 100_000} if ctx.state.shaped else {"when": object()}
        return ctx.create_callback("huge", request=asks).result()

    async def big_async(ctx: TaskContext[Publish]) -> Any:
        asks = {"body": "x" * 100_000} if ctx.state.shaped else {"when": object()}
        return ctx.create_callback("huge", request=asks).result()

    flavour.task(app, big, big_async, state=Publish)

    runtime = make_runtime(app)
    with runtime.time.running():
        for shaped in (True, False):
            done = runtime.drive(runtime.run("big", {"title": "t", "shaped": shaped}).task_id)
            assert done.status == Status.FAILED
            assert "the request of callback 'huge'" in runtime.record(done.task_id).error.message


def test_a_record_written_before_callbacks_had_requests_still_loads_and_keeps_what_it_has():
    stored = {
        "task_id": "old",
        "task_name": "review",
        "status": "waiting",
        "state": {},
        "callbacks": {
            "a" * 32: {
                "key": "review#0",
                "name": "review",
                "created_at": "2026-01-01T00:00:00Z",
                "a_newer_field": 7,
            }
        },
        "waiting_for": [{"kind": "callback", "name": "review", "id": f"old.{'a' * 32}"}],
    }
    record = TaskRecord.model_validate(stored)
    [waiter] = waiting_for(record)
    assert waiter.request is None
    assert record.model_dump(mode="json")["callbacks"]["a" * 32]["a_newer_field"] == 7


def test_a_callback_request_is_refused_when_it_is_not_json_at_creation_not_later():
    app = Continuum()

    @app.task(state=Publish)
    def task(ctx: TaskContext[Publish]) -> Any:
        try:
            ctx.create_callback("c", request={"n": float("nan")})
        except ContinuumError as exc:
            return exc.message
        return "created"

    from continuum.testing import TaskRunner

    with TaskRunner(app) as runner:
        assert "the request of callback 'c'" in runner.run("task", {"title": "t"}).result


def test_a_test_answers_a_callback_with_one_of_its_ready_answers_by_name():
    app, _ids = review_app()
    from continuum.testing import TaskRunner

    with TaskRunner(app) as runner:
        task = runner.run("review", {"title": "tides"})
        callback = task.callback("review")
        assert callback.request["title"] == "tides"
        with pytest.raises(
            ContinuumError, match=r"offers no ready answer 'maybe' \(it offers: no, yes\)"
        ):
            callback.choose("maybe")
        assert callback.choose("no").result == ANSWERS["no"]
