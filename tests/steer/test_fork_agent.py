"""A fork of a pydantic-ai agent task replays like any task's, its approvals included."""

from __future__ import annotations

from typing import Any

import pytest

from continuum import Status
from continuum._base.clock import utcnow
from continuum._record.inbox_items import CallbackAnswer
from continuum.integrations.pydantic_ai import (
    ApprovalRequest,
    ContinuumDurability,
    approval_digest,
)
from tests.integrations.agents import ENGINES, Ledger, support_agent, support_app
from tests.support import LocalRuntime, inspect_task

#: The model looks the order up, then asks for a refund that needs approval, then answers.
SCRIPT = [
    [("lookup_order", {"order_id": "A1"})],
    [("issue_refund", {"order_id": "A1", "cents": 1250})],
]


def approval_task(make_runtime: Any, engine: str) -> tuple[LocalRuntime, list[ApprovalRequest]]:
    """An app whose support task asks for a refund's approval, on a budget that checkpoints
    it before each of its units."""
    asked: list[ApprovalRequest] = []
    durability = ContinuumDurability(notify=asked.append)
    agent = support_agent(Ledger(), script=SCRIPT, durability=durability)
    app = support_app(agent, engine, default_step_s=0.01, safety_margin_s=0.0)
    return make_runtime(app, budget_s=0.0001), asked


def approve(runtime: LocalRuntime, task_id: str) -> None:
    """Send the ready answer ``approve`` of the callback the task waits for, as the CLI does."""
    [waiter] = runtime.app.client().status(task_id).waiting_for
    runtime.app.client().complete_callback(waiter.id, waiter.request["answers"]["approve"])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_fork_of_an_approval_task_at_every_checkpoint_ends_as_the_task_did(make_runtime, engine):
    runtime, _ = approval_task(make_runtime, engine)
    with runtime.time.running():
        waiting = runtime.run("support", {"question": "refund A1"})
        assert waiting.status == "waiting"
        approve(runtime, waiting.task_id)
        done = runtime.drive(waiting.task_id)
        assert done.status == "succeeded", done.error
        view = inspect_task(runtime.observer, done.task_id, versions=100)
        assert any(c.status == Status.WAITING for c in view.checkpoints)
        versions = [c.version_id for c in view.checkpoints] + ["latest"]
        for n, version in enumerate(versions):
            fork = runtime.app.client().fork(done.task_id, version=version, new_id=f"fork-{n}")
            forked = runtime.drive(fork)
            if forked.status == "waiting":  # forked before the answer arrived: answer it
                approve(runtime, fork)
                forked = runtime.drive(fork)
            assert (forked.status, forked.error, forked.result) == (
                "succeeded",
                None,
                done.result,
            ), f"fork of checkpoint {n} of {len(versions)} ({version})"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_fork_waiting_for_approval_takes_the_ready_answer_its_status_shows(make_runtime, engine):
    runtime, asked = approval_task(make_runtime, engine)
    with runtime.time.running():
        waiting = runtime.run("support", {"question": "refund A1"})
        fork = runtime.app.client().fork(waiting.task_id, version="latest", new_id="what-if")
        assert runtime.drive(fork).status == "waiting"
        [waiter] = runtime.app.client().status(fork).waiting_for
        approve(runtime, fork)
        forked = runtime.drive(fork)
    assert (forked.status, forked.error) == ("succeeded", None)
    assert len(asked) == 1  # the fork was not asked again on a fresh callback
    assert waiter.id.startswith("what-if.")
    # The request the fork shows binds its own callback: the digest is the token's, not the id's.
    assert waiter.request["digest"] == approval_digest("issue_refund", SCRIPT[1][0][1], waiter.id)
    assert waiter.request["digest"] == asked[0].digest


def test_an_answer_the_task_refuses_is_shown_with_the_call_asked_again(make_runtime):
    runtime, asked = approval_task(make_runtime, "run_sync")
    with runtime.time.running():
        waiting = runtime.run("support", {"question": "refund A1"})
        client = runtime.app.client()
        # An answer that no client checked (an older one): the task judges it itself.
        token = asked[-1].callback_id.rsplit(".", 1)[1]
        wrong = {"approved": True, "digest": "sha256:not-this-one"}
        answer = CallbackAnswer(ok=True, result=wrong, answered_at=utcnow())
        assert client.records.inbox.put_answer(waiting.task_id, token, answer)
        client.resume(waiting.task_id)
        assert runtime.drive(waiting.task_id).status == "waiting"
        [waiter] = client.status(waiting.task_id).waiting_for
    assert waiter.id == asked[-1].callback_id != asked[0].callback_id
    [refused] = waiter.request["refused"]
    assert "sha256:not-this-one" in refused
    assert asked[0].callback_id in refused
