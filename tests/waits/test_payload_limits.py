"""An answer or a signal too large for the task is refused to its sender; the task never sees it.

The limit is the task's (its app's ``max_state_bytes``, which its worker applies to what it
journals), known to any client from the record, so a client without the app (the CLI)
refuses the same.

The tests with a waiting task run in both flavours (``tests/waits/flavours.py``): the task
``def``, and ``async def`` with ``await ctx.wait_for_callback_async`` or
``await ctx.wait_for_signal_async``. A signal refused before the task first ran has no turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, PayloadTooLargeError, TaskContext
from tests.support import BlobRecords, LocalRuntime
from tests.waits.flavours import Flavour

LIMIT = 10_000


class Empty(BaseModel):
    pass


def limited_app(flavour: Flavour = Flavour("sync")) -> tuple[Continuum, dict[str, Any]]:
    app = Continuum(max_state_bytes=LIMIT)
    seen: dict[str, Any] = {"ids": []}

    @flavour.step(app)
    def hand_out(callback_id: str) -> str:
        seen["ids"].append(callback_id)
        return callback_id

    def ask(ctx: TaskContext[Empty]) -> Any:
        return ctx.wait_for_callback(hand_out, name="approval", timeout=3600)

    async def ask_async(ctx: TaskContext[Empty]) -> Any:
        return await ctx.wait_for_callback_async(hand_out, name="approval", timeout=3600)

    def listen(ctx: TaskContext[Empty]) -> Any:
        signal = ctx.wait_for_signal("go", timeout=3600)
        return signal.payload if signal is not None else None

    async def listen_async(ctx: TaskContext[Empty]) -> Any:
        signal = await ctx.wait_for_signal_async("go", timeout=3600)
        return signal.payload if signal is not None else None

    flavour.task(app, ask, ask_async, state=Empty)
    flavour.task(app, listen, listen_async, state=Empty)
    return app, seen


def bare_client(app: Continuum) -> Any:
    """A client as the CLI makes one: the stack's bucket and queue, none of the app's settings."""
    from continuum._ops.client import Client

    return Client(BlobRecords(app.records.store, prefix=app.records.prefix), app.continuations)


@dataclass
class Limited:
    """The limited app on a runtime, and a client of it."""

    seen: dict[str, Any]
    runtime: LocalRuntime
    client: Any


@pytest.fixture(params=["app", "bare"])
def limited(request: pytest.FixtureRequest, make_runtime: Any, flavour: Flavour) -> Limited:
    """The app's own client, or a bare one as the CLI makes (which knows none of its settings),
    of the app with the flavour's tasks."""
    app, seen = limited_app(flavour)
    runtime = make_runtime(app)
    client = app.client() if request.param == "app" else bare_client(app)
    return Limited(seen, runtime, client)


def test_a_callback_answer_over_the_tasks_limit_is_refused_and_the_task_keeps_waiting(
    limited: Limited,
):
    seen, runtime, client = limited.seen, limited.runtime, limited.client
    with runtime.time.running():
        waiting = runtime.run("ask", {})
        assert waiting.status == "waiting"
        with pytest.raises(PayloadTooLargeError, match=str(LIMIT)):
            client.complete_callback(seen["ids"][0], {"text": "x" * LIMIT})
        assert runtime.drive(waiting.task_id).status == "waiting"  # it saw nothing
        client.complete_callback(seen["ids"][0], {"text": "short"})
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded", done.error
    assert done.result == {"text": "short"}


def test_a_signal_over_the_tasks_limit_is_refused_and_the_task_keeps_waiting(limited: Limited):
    runtime, client = limited.runtime, limited.client
    with runtime.time.running():
        waiting = runtime.run("listen", {})
        assert waiting.status == "waiting"
        with pytest.raises(PayloadTooLargeError, match=str(LIMIT)):
            client.signal(waiting.task_id, "go", "x" * (LIMIT - 50))  # its envelope tips it over
        assert runtime.drive(waiting.task_id).status == "waiting"
        client.signal(waiting.task_id, "go", "short")
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded", done.error
    assert done.result == "short"


def test_a_signal_sent_before_the_task_first_ran_is_held_to_its_limit(make_runtime):
    app, _ = limited_app()
    make_runtime(app)  # the app on the runtime's bucket and queue
    task_id = app.client().start("listen", {})
    with pytest.raises(PayloadTooLargeError, match=str(LIMIT)):
        bare_client(app).signal(task_id, "go", "x" * LIMIT)
