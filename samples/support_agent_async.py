"""The customer-support agent of ``samples.support_agent``, async: ``await agent.run(...)``
inside an ``async def`` task, its tools ``async def`` too.

The model asks for the order and the refund policy together, and the two tool calls run side
by side (pydantic-ai's own parallel tool calls), each one journaled step; then it asks for the
refund, which waits for a person's approval on a callback, with no Lambda running meanwhile.
A short budget suspends and continues the task without sending a request or running a tool
twice, whichever of the two side-by-side calls finished first.

Locally the model is a scripted ``FunctionModel`` (no network, no API key) and the model and
the tools take measurable time; with ``CONTINUUM_BEDROCK_MODEL_ID`` set it is that Bedrock
model instead.

Run it on a 2 s budget; it stops when the refund waits for approval and prints the request:
    continuum run samples.support_agent_async:support --budget 2 \\
        --input '{"question": "Order A-1001 arrived broken. Can I get my money back?"}'

Approve it in the same command (``@approve`` sends the callback's own ready answer):
    continuum run samples.support_agent_async:support --budget 2 \\
        --input '{"question": "Order A-1001 arrived broken. Can I get my money back?"}' \\
        --answer 'approve.issue_refund=@approve'
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from datetime import timedelta

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
from continuum.integrations.pydantic_ai import ContinuumDurability, model_from_env
from samples.states.support import Chat

app = Continuum()

#: How long a refund waits for a person before it is denied.
APPROVAL_TIMEOUT = timedelta(days=2)

INSTRUCTIONS = (
    "You are a customer-support agent for an online shop. Look the order up and check the "
    "refund policy for the customer's reason (both at once), and issue a refund only when the "
    "policy allows it. Answer the customer in two or three sentences."
)


class Order(BaseModel):
    order_id: str
    item: str
    cents: int
    status: str


ORDERS = {
    "A-1001": Order(order_id="A-1001", item="ceramic teapot", cents=4599, status="delivered"),
    "B-2002": Order(order_id="B-2002", item="linen apron", cents=2450, status="in transit"),
}


async def _take_time(low_s: float, high_s: float, *seed: object) -> None:
    """Take a deterministic amount of time between ``low_s`` and ``high_s``, as I/O would."""
    span = hashlib.sha256("|".join(map(str, seed)).encode()).digest()[0] / 255
    await asyncio.sleep(low_s + span * (high_s - low_s))


# -- the scripted model (local runs and tests) --------------------------------------------------


def _results(messages: list[ModelMessage]) -> dict[str, object]:
    return {
        part.tool_name: part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


async def scripted_support(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Plays the model: the order and the policy at once, the refund (which needs approval),
    then an answer."""
    question = str(messages[0].parts[-1].content) if isinstance(messages[0], ModelRequest) else ""
    found = re.search(r"[A-Z]-\d{4}", question)
    order_id = found.group(0) if found else "unknown"
    done = _results(messages)
    await _take_time(0.2, 0.4, "model", order_id, len(done))

    def call(*calls: tuple[str, dict[str, object]]) -> ModelResponse:
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f"{name}-{order_id}") for name, args in calls
            ]
        )

    if not done:
        reason = "damaged" if "broken" in question else "changed mind"
        return call(("lookup_order", {"order_id": order_id}), ("refund_policy", {"reason": reason}))
    order = done["lookup_order"]
    if not isinstance(order, dict):
        return ModelResponse(parts=[TextPart(f"I could not find order {order_id}: {order}")])
    if "issue_refund" not in done and str(done["refund_policy"]).startswith("allowed"):
        return call(("issue_refund", {"order_id": order_id, "cents": order["cents"]}))
    outcome = done.get("issue_refund", done["refund_policy"])
    return ModelResponse(parts=[TextPart(f"About your {order['item']} ({order_id}): {outcome}")])


# -- the tools ------------------------------------------------------------------------------------


async def lookup_order(order_id: str) -> Order | str:
    """Look an order up by its id (``A-1001``)."""
    await _take_time(0.15, 0.35, "lookup", order_id)
    return ORDERS.get(order_id) or f"no order {order_id!r}"


async def refund_policy(reason: str) -> str:
    """What the refund policy says for a customer's reason (damaged, changed mind, ...)."""
    await _take_time(0.15, 0.3, "policy", reason)
    if reason == "damaged":
        return "allowed: a damaged item is refunded in full"
    return "not allowed: only damaged items are refunded after delivery"


async def issue_refund(order_id: str, cents: int) -> str:
    """Refund ``cents`` on an order. A person approves each refund before it runs."""
    await _take_time(0.2, 0.4, "refund", order_id, cents)
    return f"refunded {cents / 100:.2f} USD to the card that paid for {order_id}"


agent: Agent[None, str] = Agent(
    model_from_env(FunctionModel(scripted_support, model_name="scripted-support")),
    name="support",
    instructions=INSTRUCTIONS,
    tools=[lookup_order, refund_policy],
    capabilities=[ContinuumDurability(approval_timeout=APPROVAL_TIMEOUT)],
)
agent.tool_plain(requires_approval=True)(issue_refund)


@app.task(state=Chat)
async def support(ctx: TaskContext[Chat]) -> str:
    """One long turn: the agent's run, from the question to its answer."""
    result = await agent.run(ctx.state.question)
    return result.output


if __name__ == "__main__":  # pragma: no cover - a quick look without continuum's runtime
    print(asyncio.run(agent.run("Order A-1001 arrived broken.")).output)
