"""Agents for the integration suite: a scripted FunctionModel, tools that count what they do.

The test owns every count: ``Ledger`` records each model request the FunctionModel answers
(by the number of tool results it had seen, so a request sent twice shows as a repeat) and
each side effect a tool performs. Nothing here asks continuum or pydantic-ai what ran.

Each app runs its agent with one of the two ``ENGINES``: ``agent.run_sync`` in a sync task, or
``await agent.run`` in an async task (where the tool calls asked together run side by side).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from continuum import Continuum, TaskContext
from continuum.integrations.pydantic_ai import ContinuumDurability


@dataclass
class Ledger:
    """What really happened, as the test saw it."""

    #: one entry per model request answered: how many tool results the request carried.
    requests: list[int] = field(default_factory=list)
    #: one entry per tool side effect: (tool, argument).
    effects: list[tuple[str, str]] = field(default_factory=list)
    #: what each request showed the model as the last tool result (denials included).
    seen: list[str] = field(default_factory=list)
    #: called with the tool's name right after each side effect (a test's worker death).
    after_effect: Callable[[str], None] | None = None

    def effect(self, tool: str, argument: str) -> None:
        self.effects.append((tool, argument))
        if self.after_effect is not None:
            self.after_effect(tool)


class Order(BaseModel):
    """A structured tool result: it must come back as the same JSON after a replay."""

    order_id: str
    cents: int
    status: str


#: What the scripted model asks for, one model response per entry; then it answers.
SCRIPT: list[list[tuple[str, dict[str, Any]]]] = [
    [("lookup_order", {"order_id": "A1"})],
    [("check_stock", {"sku": "tide-pod"}), ("lookup_order", {"order_id": "B2"})],
]


def tool_results(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def scripted_model(
    ledger: Ledger,
    script: list[list[tuple[str, dict[str, Any]]]],
    *,
    pause_s: float = 0.0,
) -> FunctionModel:
    """A model that calls the tools of ``script`` in turn, then sums up what it saw."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = tool_results(messages)
        ledger.requests.append(len(results))
        if results:
            ledger.seen.append(str(results[-1].content))
        time.sleep(pause_s)
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step < len(script):
            return ModelResponse(
                parts=[
                    ToolCallPart(tool, args, tool_call_id=f"call-{step}-{i}")
                    for i, (tool, args) in enumerate(script[step])
                ]
            )
        summary = "; ".join(f"{r.tool_name}={r.content}" for r in results)
        return ModelResponse(parts=[TextPart(f"done after {len(results)} tools: {summary}")])

    return FunctionModel(respond, model_name="scripted")


def support_agent(
    ledger: Ledger,
    *,
    script: list[list[tuple[str, dict[str, Any]]]] = SCRIPT,
    pause_s: float = 0.0,
    durability: ContinuumDurability[Any] | None = None,
    extra: tuple[Any, ...] = (),
    name: str = "support",
) -> Agent[None, str]:
    """An agent with two counting tools and a refund tool that needs approval (and the
    ``extra`` capabilities)."""
    agent: Agent[None, str] = Agent(
        scripted_model(ledger, script, pause_s=pause_s),
        name=name,
        capabilities=[durability or ContinuumDurability(), *extra],
    )

    @agent.tool_plain
    def lookup_order(order_id: str) -> Order:
        ledger.effect("lookup_order", order_id)
        time.sleep(pause_s)
        return Order(order_id=order_id, cents=1250, status="shipped")

    @agent.tool_plain
    def check_stock(sku: str) -> dict[str, int]:
        ledger.effect("check_stock", sku)
        time.sleep(pause_s)
        return {sku: 7}

    @agent.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, cents: int) -> str:
        ledger.effect("issue_refund", f"{order_id}:{cents}")
        return f"refunded {cents} cents on {order_id}"

    return agent


class Chat(BaseModel):
    question: str


#: How a task runs its agent: ``agent.run_sync`` in a sync task, ``await agent.run`` in an
#: async one.
ENGINES = ("run_sync", "run")


def support_app(agent: Agent[None, str], engine: str = "run_sync", **options: Any) -> Continuum:
    """An app whose task ``support`` runs ``agent`` once with ``engine`` and returns its
    output."""
    app = Continuum(**options)
    if engine == "run_sync":

        @app.task(state=Chat)
        def support(ctx: TaskContext[Chat]) -> str:
            return agent.run_sync(ctx.state.question).output

    else:
        assert engine == "run", engine

        @app.task(state=Chat, name="support")
        async def support_async(ctx: TaskContext[Chat]) -> str:
            return (await agent.run(ctx.state.question)).output

    return app


def side_by_side(effects: list[tuple[str, str]], batches: list[int]) -> list[list[tuple[str, str]]]:
    """``effects`` cut into the batches of tool calls asked together (``batches``: their sizes),
    each sorted: the calls of one batch run side by side in an async task, in any order."""
    cut, start = [], 0
    for size in batches:
        cut.append(sorted(effects[start : start + size]))
        start += size
    assert start == len(effects), (effects, batches)
    return cut
