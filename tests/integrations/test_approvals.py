"""A tool that needs approval: the task waits on a callback bound to that exact call."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from continuum import CallbackError, Status, WaitKind
from continuum._record.inbox_items import CallbackAnswer
from continuum._record.model import walk
from continuum.integrations.pydantic_ai import (
    MAX_REFUSED_ANSWERS,
    ApprovalRequest,
    ContinuumDurability,
    approval_digest,
)
from tests.integrations.agents import Ledger, support_agent, support_app
from tests.integrations.conftest import WorkerDied, drive_through_deaths
from tests.support import LocalRuntime

REFUND = [[("issue_refund", {"order_id": "A1", "cents": 1250})]]
REFUNDED = [("issue_refund", "A1:1250")]


@dataclass
class Refund:
    """A support task waiting for the approval of a refund, and what the test sees of it."""

    runtime: LocalRuntime
    ledger: Ledger
    #: every ApprovalRequest handed out, in order.
    asked: list[ApprovalRequest]
    task_id: str
    invocations: int

    def answer(self, result: Any, request: int = -1) -> str:
        """Complete the callback of ``asked[request]`` with ``result``; the task's status
        once it has run on as far as it can."""
        self.runtime.app.client().complete_callback(self.asked[request].callback_id, result)
        return self.runtime.drive(self.task_id).status

    def answer_unchecked(self, result: Any, request: int = -1) -> str:
        """Put ``result`` in the inbox as a client that checks nothing would (an older one),
        and wake the task; its status once it has run on as far as it can."""
        client = self.runtime.app.client()
        token = self.asked[request].callback_id.rsplit(".", 1)[1]
        answer = CallbackAnswer(ok=True, result=result, answered_at=datetime.now(UTC))
        assert client.records.inbox.put_answer(self.task_id, token, answer)
        client.resume(self.task_id)
        return self.runtime.drive(self.task_id).status

    def refused(self, result: Any, request: int = -1) -> str:
        """What ``client.complete_callback`` says refusing ``result``; it wrote nothing."""
        inbox = self.runtime.app.client().records.inbox
        token = self.asked[request].callback_id.rsplit(".", 1)[1]
        with pytest.raises(CallbackError) as refused:
            self.runtime.app.client().complete_callback(self.asked[request].callback_id, result)
        assert inbox.answer(self.task_id, token) is None
        return str(refused.value)

    @property
    def refunds(self) -> list[tuple[str, str]]:
        return [effect for effect in self.ledger.effects if effect[0] == "issue_refund"]


@contextlib.contextmanager
def refund_waiting(
    make_runtime: Any, engine: str, *, script: list[Any] = REFUND, **options: Any
) -> Iterator[Refund]:
    """Start a support task whose model asks for refunds (its agent run by ``engine``); yield
    it waiting for approval."""
    ledger, asked = Ledger(), []
    durability = ContinuumDurability(notify=asked.append, **options)
    agent = support_agent(ledger, script=script, durability=durability)
    runtime = make_runtime(support_app(agent, engine))
    with runtime.time.running():
        waiting = runtime.run("support", {"question": "refund A1"})
        assert waiting.status == "waiting"
        yield Refund(runtime, ledger, asked, waiting.task_id, waiting.invocations)


def test_the_task_waits_with_zero_invocations_until_the_approval_callback_is_completed(
    make_runtime, engine
):
    with refund_waiting(make_runtime, engine) as refund:
        [request] = refund.asked
        assert (request.tool_name, request.args) == ("issue_refund", REFUND[0][0][1])
        assert request.digest == approval_digest(
            "issue_refund", {"cents": 1250, "order_id": "A1"}, request.callback_id
        )
        [waiter] = refund.runtime.app.client().status(refund.task_id).waiting_for
        assert (waiter.kind, waiter.name, waiter.id) == (
            WaitKind.CALLBACK,
            "approve.issue_refund",
            request.callback_id,
        )
        assert waiter.request["tool"] == "issue_refund"
        assert waiter.request["args"] == REFUND[0][0][1]
        assert waiter.request["digest"] == request.digest
        assert waiter.request["answers"] == {"approve": request.approve(), "deny": request.deny()}
        refund.runtime.time.advance(3 * 24 * 3600)  # three days pass: no invocation at all
        assert refund.runtime.invoke_once() is None
        assert refund.runtime.record(refund.task_id).counters.invocations == refund.invocations
        assert refund.refunds == []
        assert refund.answer(request.approve()) == "succeeded"
        record = refund.runtime.record(refund.task_id)
    assert record.counters.invocations == refund.invocations + 1  # the wake, nothing else
    assert refund.refunds == REFUNDED
    assert refund.ledger.seen == ["refunded 1250 cents on A1"]
    assert refund.ledger.requests == [0, 1]  # the first request was not sent again on the wake


def test_a_denial_reaches_the_model_with_its_message(make_runtime, engine):
    with refund_waiting(make_runtime, engine) as refund:
        assert refund.answer({"approved": False, "message": "not without a receipt"}) == (
            "succeeded"
        )
    assert refund.ledger.seen == ["not without a receipt"]
    assert refund.refunds == []


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"approved": True}, "answer lacks 'digest'"),
        ({"approved": True, "digest": "sha256:0"}, 'answer.digest must be "sha256:'),
        ({"yes": 1}, "answer lacks 'approved'"),
        ("true", 'answer must be object, got "true"'),
    ],
    ids=["no digest", "another digest", "not an answer", "a bare string"],
)
def test_an_answer_that_does_not_fit_the_request_is_refused_at_once_and_written_nowhere(
    make_runtime, engine, answer, why
):
    with refund_waiting(make_runtime, engine) as refund:
        [request] = refund.asked
        message = refund.refused(answer)
        assert why in message
        assert request.digest in message  # what the callback expects: its two ready answers
        assert "approve:" in message
        assert "deny:" in message
        assert refund.runtime.invoke_once() is None  # nothing woke the task
        assert refund.answer(request.approve()) == "succeeded"
    assert refund.asked == [request]  # the same callback took the right answer
    assert refund.refunds == REFUNDED


def test_an_approval_with_another_digest_that_reaches_the_task_is_refused_and_asked_again(
    make_runtime, engine
):
    with refund_waiting(make_runtime, engine) as refund:
        first = refund.asked[0]
        other = approval_digest("issue_refund", first.args, f"{refund.task_id}.{'0' * 32}")
        assert refund.answer_unchecked({"approved": True, "digest": other}) == "waiting"
        assert refund.refunds == []
        first, again = refund.asked
        assert again.callback_id != first.callback_id
        assert again.digest != first.digest  # bound to its own callback
        assert refund.answer(again.approve()) == "succeeded"
    assert refund.refunds == REFUNDED


@pytest.mark.parametrize(
    "answer",
    [{"approved": True}, {"approved": True, "digest": "sha256:0"}, {"yes": 1}, "true"],
    ids=["no digest", "another digest", "not an answer", "a bare string"],
)
def test_unchecked_answers_refused_too_often_deny_the_call_saying_why(make_runtime, engine, answer):
    with refund_waiting(make_runtime, engine) as refund:
        statuses = [refund.answer_unchecked(answer) for _ in range(MAX_REFUSED_ANSWERS)]
    assert statuses == ["waiting"] * (MAX_REFUSED_ANSWERS - 1) + ["succeeded"]
    assert refund.refunds == []
    assert refund.ledger.seen[0].startswith(
        f"The call was not approved: {MAX_REFUSED_ANSWERS} answers were refused"
    )


def test_approving_one_call_never_approves_a_retry_with_other_arguments(make_runtime, engine):
    script = [
        [("issue_refund", {"order_id": "A1", "cents": 1250})],
        [("issue_refund", {"order_id": "A1", "cents": 9000})],  # the model asks again, for more
    ]
    with refund_waiting(make_runtime, engine, script=script) as refund:
        first = refund.asked[0]
        assert refund.answer(first.approve()) == "waiting"  # the retry waits for its own yes
        retry = refund.asked[1]
        assert retry.args == {"order_id": "A1", "cents": 9000}
        assert retry.digest != first.digest
        assert "answer.digest must be" in refund.refused(first.approve())
        assert refund.answer_unchecked(first.approve()) == "waiting"  # the task refuses it too
        assert refund.answer({"approved": False}) == "succeeded"
    assert refund.refunds == REFUNDED
    assert refund.ledger.seen[-1] == "A person denied this call."


def test_a_yes_for_one_request_never_approves_another_with_the_same_tool_and_arguments(
    make_runtime, engine
):
    same = {"order_id": "A1", "cents": 1250}
    script = [[("issue_refund", same)], [("issue_refund", same)]]  # asked twice, alike
    with refund_waiting(make_runtime, engine, script=script) as refund:
        first = refund.asked[0]
        assert refund.answer(first.approve()) == "waiting"
        second = refund.asked[1]
        assert (second.tool_name, second.args) == (first.tool_name, first.args)
        assert second.digest != first.digest
        assert "answer.digest must be" in refund.refused(first.approve())
        assert refund.answer_unchecked(first.approve()) == "waiting"  # refused in the task
        assert refund.answer(refund.asked[-1].deny("once is enough")) == "succeeded"
    assert refund.refunds == REFUNDED  # the first refund only
    assert refund.ledger.seen[-1] == "once is enough"


def test_an_approval_that_times_out_is_a_denial_the_model_reads(make_runtime, engine):
    with refund_waiting(make_runtime, engine, approval_timeout=3600) as refund:
        done = refund.runtime.drive(refund.task_id, stop_when_waiting=False)
    assert done.status == "succeeded"
    assert refund.ledger.seen[0].startswith("No decision on this call arrived")
    assert refund.refunds == []


def test_a_crash_inside_the_approved_tool_does_not_run_it_twice(make_runtime, engine):
    def die(tool: str) -> None:
        raise WorkerDied  # the refund went out; the worker dies before the journal says so

    with refund_waiting(make_runtime, engine) as refund:
        refund.ledger.after_effect = die
        refund.runtime.app.client().complete_callback(
            refund.asked[0].callback_id, refund.asked[0].approve()
        )
        deaths = drive_through_deaths(refund.runtime, refund.task_id)
    assert deaths == 1
    assert refund.runtime.record(refund.task_id).status == Status.SUCCEEDED
    assert refund.refunds == REFUNDED  # once, and never again after the death
    assert "may or may not have taken effect" in refund.ledger.seen[0]


def test_a_crash_right_after_the_approval_was_taken_does_not_run_the_tool_twice(
    make_runtime, engine
):
    with refund_waiting(make_runtime, engine) as refund:
        store, died = refund.runtime.store, []
        original = store.put

        def put(key: str, *args: Any, **kwargs: Any) -> Any:
            """The first save that holds the approval is the worker's last."""
            landed = original(key, *args, **kwargs)
            journal = walk(refund.runtime.record(refund.task_id).journal)
            taken = [
                e for e in journal if e.name == "approve.issue_refund.result" and not e.partial
            ]
            if key.endswith("record.json") and taken and not died:
                died.append(key)
                raise WorkerDied
            return landed

        store.put = put  # type: ignore[method-assign]
        refund.runtime.app.client().complete_callback(
            refund.asked[0].callback_id, refund.asked[0].approve()
        )
        deaths = drive_through_deaths(refund.runtime, refund.task_id)
    assert deaths == 1
    assert refund.runtime.record(refund.task_id).status == Status.SUCCEEDED
    # At most once: the worker died after saving that the refund starts, before it ran; the
    # refund is not run after the death, and the model is told it may have happened.
    assert refund.refunds == []
    assert "may or may not have taken effect" in refund.ledger.seen[0]


def test_request_input_waits_on_a_callback_whose_id_is_its_token(make_runtime, engine):
    """pydantic-ai's wait_for_external_event (here RequestInput's) waits on a callback too."""
    from pydantic_ai.capabilities import RequestInput
    from pydantic_ai.exceptions import CallDeferred

    ledger, tokens = Ledger(), []

    def ask(ctx: Any, requests: Any, token: str) -> None:
        tokens.append(token)  # hand it to the warehouse; it answers later

    agent = support_agent(
        ledger, script=[[("ask_warehouse", {"sku": "tide-pod"})]], extra=(RequestInput(ask),)
    )

    @agent.tool_plain
    def ask_warehouse(sku: str) -> str:
        ledger.effect("ask_warehouse", sku)
        raise CallDeferred  # a person at the warehouse answers

    runtime = make_runtime(support_app(agent, engine))
    with runtime.time.running():
        waiting = runtime.run("support", {"question": "in stock?"})
        assert waiting.status == "waiting"
        [token] = tokens
        [waiter] = runtime.app.client().status(waiting.task_id).waiting_for
        assert waiter.id == token
        runtime.app.client().complete_callback(token, {"calls": {"call-0-0": "42 on the shelf"}})
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded", done.error
    assert ledger.seen == ["42 on the shelf"]
    assert tokens == [token]  # ask ran once: the wake replayed it from the journal


def test_a_task_cancelled_while_it_waits_for_approval_ends_cancelled_and_refunds_nothing(
    make_runtime, engine
):
    with refund_waiting(make_runtime, engine) as refund:
        refund.runtime.app.client().cancel(refund.task_id, "the customer withdrew")
        done = refund.runtime.drive(refund.task_id)
    assert done.status == "cancelled"
    assert refund.refunds == []


@contextlib.contextmanager
def linked_refund(make_runtime: Any, engine: str) -> Iterator[Refund]:
    """A support task waiting for approval, on an app with callback links."""
    ledger, asked = Ledger(), []
    durability = ContinuumDurability(notify=asked.append)
    agent = support_agent(ledger, script=REFUND, durability=durability)
    app = support_app(agent, engine, signing_key="k", callback_url="https://links.example.test")
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("support", {"question": "refund A1"})
        assert waiting.status == "waiting"
        yield Refund(runtime, ledger, asked, waiting.task_id, waiting.invocations)


@pytest.mark.parametrize(
    ("decision", "refunds", "seen"),
    [
        ("approve", REFUNDED, ["refunded 1250 cents on A1"]),
        ("deny", [], ["no receipt, no refund"]),
    ],
)
def test_an_approval_request_carries_its_link_and_a_person_answers_there(
    make_runtime, engine, decision, refunds, seen
):
    from urllib.parse import urlencode

    from continuum._waits.link_endpoint import LinkEndpoint

    with linked_refund(make_runtime, engine) as refund:
        [request] = refund.asked
        [waiter] = refund.runtime.app.client().status(refund.task_id).waiting_for
        assert request.url is not None
        assert request.url == waiter.url
        endpoint = LinkEndpoint.of(refund.runtime.app)
        path = request.url.removeprefix("https://links.example.test")
        page = endpoint.handle("GET", path, "", b"")
        assert page.status == 200
        assert "<h1>Issue refund</h1>" in page.body  # the tool, as a person reads it
        assert "<dt>Order id</dt><dd>A1</dd>" in page.body
        assert "<dt>Cents</dt><dd>1250</dd>" in page.body
        assert refund.task_id in page.body
        for machine in ("expects", "sha256:", request.digest, "tool_call_id", "{"):
            assert machine not in page.body.split("</style>")[1], machine
        comment = "no receipt, no refund" if decision == "deny" else "ok"
        body = urlencode({"decision": decision, "comment": comment}).encode()
        answered = endpoint.handle("POST", path, "application/x-www-form-urlencoded", body)
        assert answered.status == 200, answered.body
        assert refund.runtime.drive(refund.task_id).status == "succeeded"
    assert refund.refunds == refunds
    assert refund.ledger.seen == seen
