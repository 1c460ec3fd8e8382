"""An async pydantic-ai agent's asyncio tasks are child contexts: each is sent once, in the
invocation where it ended, however often later invocations replay it."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent

from continuum import TaskContext
from continuum.integrations.pydantic_ai import ContinuumDurability
from tests.integrations.agents import Chat, Ledger, scripted_model
from tests.integrations.test_async_agent import TOGETHER, finishing_in_reverse
from tests.support import LocalRuntime
from tests.tracing.conftest import doubled, spans_of


def test_an_agents_asyncio_tasks_replayed_after_a_wait_send_nothing_again(
    traced, exporter, naming, aws
):
    ledger = Ledger()
    agent: Agent[None, str] = Agent(
        scripted_model(ledger, TOGETHER),
        name="support",
        tools=finishing_in_reverse(ledger, []),
        capabilities=[ContinuumDurability()],
    )
    app = traced(naming)

    @app.task(state=Chat)
    async def support(ctx: TaskContext[Chat]) -> str:
        answer = (await agent.run(ctx.state.question)).output
        await ctx.sleep_async(3600, name="follow-up")
        await ctx.sleep_async(3600, name="again")
        return answer

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("support", {"question": "?"}, task_id="chat-1"))
    record = runtime.record("chat-1")
    assert record.status.value == "succeeded", record.error
    assert record.counters.invocations == 3
    spans = spans_of(exporter)
    assert doubled(spans) == []
    assert sum(s.name == "_call_tool" for s in spans) == 3
