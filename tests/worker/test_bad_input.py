"""Bad input gets a clear error naming what was wrong, is not retried, and corrupts nothing.

Bad messages never reach a task body: those tests run with the sync ``tally`` as bystander.
A task that raises runs in both flavours (``tests/flavours.py``), the async twin awaiting its
``async def`` step.
"""

from __future__ import annotations

import json

import pytest

from continuum import InvalidInputError, InvalidTaskIdError, Status, UnknownTaskError
from tests.conftest import (
    ScriptedContext,
    continuation,
    drain,
    record_key,
    share,
    snapshot_objects,
    sqs_event,
)
from tests.flavours import FLAVOURS
from tests.support import LocalRuntime
from tests.tally import build


@pytest.fixture
def setup(aws):
    app, calls = build()
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    # A bystander task half-way through: bad input must leave its record alone.
    app.client().start("tally", {"label": "bystander"}, task_id="bystander")
    runtime.invoke_once(ScriptedContext(4, executed=lambda: sum(calls.values())))
    assert runtime.record("bystander").status == Status.SUSPENDED
    return app, calls, runtime


def context(calls):
    return ScriptedContext(None, executed=lambda: sum(calls.values()))


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("{not json", "not a continuation message"),
        ('{"task": "tally"}', "task_id: Field required"),
        (
            json.dumps({"v": 1, "task_id": "../etc", "generation": 0, "reason": "x", "sent_at": 0}),
            "not a safe S3 key",
        ),
        (continuation("no-such-task", 0), "no record for this continuation"),
    ],
    ids=["malformed-json", "not-a-continuation", "unsafe-task-id", "unknown-task-id"],
)
def test_a_bad_message_is_acknowledged_with_a_clear_error(setup, caplog, body, problem):
    app, calls, runtime = setup
    before = snapshot_objects(runtime)
    caplog.clear()

    result = app.handler(sqs_event(body), context(calls))

    assert result == {"batchItemFailures": []}  # acknowledged: retrying cannot fix it
    assert problem in caplog.text
    assert snapshot_objects(runtime) == before


def test_a_bad_message_never_fails_its_neighbours(setup):
    app, calls, runtime = setup
    event = sqs_event(
        "garbage", continuation("bystander", 1), "{}", message_ids=["bad-1", "good", "bad-2"]
    )
    assert app.handler(event, context(calls)) == {"batchItemFailures": []}
    assert runtime.record("bystander").status == Status.SUCCEEDED


def test_unknown_task_name_at_start_names_it_and_writes_nothing(setup):
    app, _, runtime = setup
    before = snapshot_objects(runtime)
    with pytest.raises(UnknownTaskError, match="unknown task 'talley'; this app defines: tally"):
        app.client().start("talley", {"label": "x"})
    assert snapshot_objects(runtime) == before


def test_unknown_task_name_in_a_record_fails_that_task_with_the_reason(setup):
    app, calls, runtime = setup
    other, _ = build()
    other.tasks["renamed"] = other.tasks.pop("tally")
    other.tasks["renamed"].name = "renamed"
    share(other, runtime).client().start("renamed", {"label": "x"}, task_id="orphan")
    bystander = runtime.observer_store.get(record_key("bystander")).etag

    # This deployment's app has no task "renamed".
    app.handler(sqs_event(continuation("orphan", 0)), context(calls))

    record = runtime.record("orphan")
    assert record.status == Status.FAILED
    assert record.error.type == "UnknownTaskError"
    assert "unknown task 'renamed'" in record.error.message
    assert runtime.observer_store.get(record_key("bystander")).etag == bystander


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({}, "label: Field required"),
        ({"label": "x", "n": "many"}, "n: Input should be a valid integer"),
        ("{broken", "Invalid JSON"),
    ],
)
def test_input_that_fails_the_state_model_names_the_task_and_field(setup, payload, problem):
    app, _, runtime = setup
    before = snapshot_objects(runtime)
    with pytest.raises(InvalidInputError) as info:
        app.client().start("tally", payload, task_id="bad-input")
    assert "task 'tally'" in str(info.value)
    assert "Tally" in str(info.value)
    assert problem in str(info.value)
    assert snapshot_objects(runtime) == before


def test_an_unsafe_task_id_at_start_is_refused(setup):
    app, _, runtime = setup
    before = snapshot_objects(runtime)
    for task_id in ("../x", "/abs", "a\nb", "x" * 10_000):
        with pytest.raises(InvalidTaskIdError):
            app.client().start("tally", {"label": "x"}, task_id=task_id)
    assert snapshot_objects(runtime) == before


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_task_that_raises_fails_with_the_step_and_reason(setup, flavour):
    app, calls, runtime = setup

    from tests.tally import Tally

    if flavour == "sync":

        @app.step
        def explode(x: int) -> int:
            raise RuntimeError(f"boom at {x}")

        @app.task(state=Tally)
        def doomed(ctx):
            explode(ctx.state.n)

    else:

        @app.step
        async def explode(x: int) -> int:
            raise RuntimeError(f"boom at {x}")

        @app.task(state=Tally)
        async def doomed(ctx):
            await explode(ctx.state.n)

    task_id = app.client().start("doomed", {"label": "d"})
    record = drain(runtime, task_id, lambda i: context(calls))
    assert record.status == Status.FAILED
    assert record.error.step == "explode#0"
    assert record.error.type == "RuntimeError"
    assert "boom at 0" in record.error.message


@pytest.mark.parametrize(
    "task_id",
    ["../x", "/etc/passwd", "ctl\x01char", "new\nline", "x" * 10_000],
    ids=["dot-dot", "absolute", "control", "newline", "10KB"],
)
def test_a_message_with_an_unsafe_task_id_is_acknowledged_and_writes_nothing(
    setup, caplog, task_id
):
    app, calls, runtime = setup
    before = snapshot_objects(runtime)
    body = json.dumps({"v": 1, "task_id": task_id, "generation": 0, "reason": "x", "sent_at": 0})
    assert app.handler(sqs_event(body), context(calls)) == {"batchItemFailures": []}
    assert "rejected a message" in caplog.text
    assert snapshot_objects(runtime) == before
