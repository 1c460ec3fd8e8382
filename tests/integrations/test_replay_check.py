"""check_replay_safe on a pydantic-ai agent task: the units it journals are compared by what is
deterministic about them (their keys, names and JSON arguments), never by the identity of the
objects pydantic-ai builds anew in every run."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent

from continuum import ConfigurationError, Continuum, Status, TaskContext
from continuum.integrations.pydantic_ai import ContinuumDurability
from continuum.testing import ReadyAnswer, ReplayDivergence, check_replay_safe
from tests.integrations.agents import SCRIPT, Chat, Ledger, support_agent, support_app


def test_a_deterministic_agent_task_is_replay_safe_wherever_it_is_suspended(engine):
    ledger = Ledger()
    app = support_app(support_agent(ledger), engine)
    report = check_replay_safe(app, "support", {"question": "where is my order?"})
    assert report.status == Status.SUCCEEDED
    assert report.result.startswith("done after 3 tools")
    tools = sum(len(response) for response in SCRIPT)
    assert len(report.steps) == len(SCRIPT) + 1 + tools  # each model request and tool call
    assert len(report.runs) == len(report.steps)


def test_an_agent_task_that_runs_another_agent_after_a_suspension_is_named(engine):
    ledger = Ledger()
    first, second = support_agent(ledger), support_agent(ledger, name="triage")
    app = Continuum()
    runs: list[str] = []

    def pick(ctx: TaskContext[Chat]) -> Agent[None, str]:
        runs.append(ctx.state.question)  # state outside the task: not replay-safe
        return first if len(runs) == 1 else second

    if engine == "run_sync":

        @app.task(state=Chat)
        def support(ctx: TaskContext[Chat]) -> str:
            return pick(ctx).run_sync(ctx.state.question).output

    else:

        @app.task(state=Chat, name="support")
        async def support_async(ctx: TaskContext[Chat]) -> str:
            return (await pick(ctx).run(ctx.state.question)).output

    # Under ``run`` the key is the step's in the child contexts of the asyncio tasks that ran it.
    named = r"step '([^']*/)?triage__model\.request#0'.* never called"
    with pytest.raises(ReplayDivergence, match=named):
        check_replay_safe(app, "support", {"question": "where is my order?"})


def test_an_agent_on_pydantic_ais_test_model_is_replay_safe(engine):
    agent: Agent[None, str] = Agent("test", name="echo", capabilities=[ContinuumDurability()])
    report = check_replay_safe(support_app(agent, engine), "support", {"question": "hi"})
    assert report.status == Status.SUCCEEDED
    assert [step.name for step in report.steps] == ["echo__model.request"]


@pytest.mark.parametrize("ready", ["approve", "deny"])
def test_an_agent_task_waiting_for_approval_is_replay_safe_with_a_ready_answer(engine, ready):
    ledger = Ledger()
    script = [[("issue_refund", {"order_id": "A1", "cents": 1250})]]
    durability = ContinuumDurability(notify=lambda request: None)
    app = support_app(support_agent(ledger, script=script, durability=durability), engine)
    report = check_replay_safe(
        app,
        "support",
        {"question": "refund A1"},
        callbacks={"approve.issue_refund": ReadyAnswer(ready)},
    )
    assert report.status == Status.SUCCEEDED
    names = [step.name for step in report.steps]
    assert "approve.issue_refund.submit" in names
    refunded = "support__function_toolset__<agent>.call_tool:issue_refund" in names
    assert refunded == (ready == "approve")


def test_a_ready_answer_the_callback_does_not_offer_is_a_clear_error(engine):
    ledger = Ledger()
    script = [[("issue_refund", {"order_id": "A1", "cents": 1250})]]
    durability = ContinuumDurability(notify=lambda request: None)
    app = support_app(support_agent(ledger, script=script, durability=durability), engine)
    with pytest.raises(
        ConfigurationError, match=r"offers no ready answer 'maybe' \(it offers: approve, deny\)"
    ):
        check_replay_safe(
            app,
            "support",
            {"question": "x"},
            callbacks={"approve.issue_refund": ReadyAnswer("maybe")},
        )
