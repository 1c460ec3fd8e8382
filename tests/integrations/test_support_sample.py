"""samples/support_agent.py and its async version, samples/support_agent_async.py, run as
their docstrings and the docs say, locally and on Bedrock."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest
from pydantic_ai.models import infer_model
from pydantic_ai.models.bedrock import BedrockConverseModel

from continuum._record.model import walk
from continuum.integrations.pydantic_ai import (
    BEDROCK_MODEL_ENV,
    ApprovalRequest,
    model_from_env,
)

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Order A-1001 arrived broken. Can I get my money back?"
#: --answer 'approve.issue_refund=@READY' as the docs show it.
ANSWER = re.compile(r"--answer 'approve\.issue_refund=@(\w+)'")


@pytest.fixture(params=["support_agent", "support_agent_async"])
def sample(request: pytest.FixtureRequest) -> ModuleType:
    """The support sample: ``agent.run_sync`` in a sync task, or ``await agent.run``."""
    return importlib.import_module(f"samples.{request.param}")


def test_the_documented_answer_approves_the_refund_the_agent_asks_for(make_runtime, sample, capsys):
    runtime = make_runtime(sample.app, budget_s=2.0)
    with runtime.time.running():
        waiting = runtime.run("support", {"question": QUESTION})
        assert waiting.status == "waiting"
        assert waiting.invocations >= 2  # a 2 s budget: it continued before it waited
        # What is to be approved stays in the journal, as the step that handed it out returned it.
        [request] = [
            ApprovalRequest.model_validate(entry.result)
            for entry in walk(runtime.record(waiting.task_id).journal)
            if entry.name == "approve.issue_refund.submit"
        ]
        assert request.callback_id in capsys.readouterr().out  # the default notify prints it
        assert (request.tool_name, request.args) == (
            "issue_refund",
            {"order_id": "A-1001", "cents": 4599},
        )
        [waiter] = runtime.app.client().status(waiting.task_id).waiting_for
        for doc in (Path(sample.__file__), ROOT / "docs" / "pydantic-ai.md"):
            documented = ANSWER.findall(doc.read_text())
            assert documented, doc
            assert all(waiter.request["answers"][name] == request.approve() for name in documented)
        runtime.app.client().complete_callback(request.callback_id, request.approve())
        done = runtime.drive(waiting.task_id)
    assert done.status == "succeeded"
    assert done.result == (
        "About your ceramic teapot (A-1001): refunded 45.99 USD to the card that paid for A-1001"
    )


def test_a_reason_the_policy_refuses_asks_no_one(make_runtime, sample):
    runtime = make_runtime(sample.app, budget_s=30.0)
    done = runtime.run("support", {"question": "Order B-2002: I changed my mind about it."})
    assert done.status == "succeeded"
    assert done.result.endswith("not allowed: only damaged items are refunded after delivery")


def test_with_the_stacks_model_id_the_agent_uses_that_bedrock_model(monkeypatch):
    monkeypatch.delenv(BEDROCK_MODEL_ENV, raising=False)
    assert model_from_env("test") == "test"
    monkeypatch.setenv(BEDROCK_MODEL_ENV, "us.amazon.nova-pro-v1:0")
    chosen = model_from_env("test")
    assert chosen == "bedrock:us.amazon.nova-pro-v1:0"
    model = infer_model(chosen)  # pydantic-ai's Bedrock provider: built, nothing sent
    assert isinstance(model, BedrockConverseModel)
    assert model.model_name == "us.amazon.nova-pro-v1:0"
