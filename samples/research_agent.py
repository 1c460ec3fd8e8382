"""A research agent: one model call per turn plus the tool calls the model asks for.

The model and the tools are deterministic fakes (no network, no API key) whose calls take
measurable time, so a short invocation budget forces continuations. The report depends only
on the topic, never on where the continuations fell.

Run it locally:
    continuum run samples.research_agent:research --input '{"topic": "tides"}' --budget 3
"""

from __future__ import annotations

import hashlib
import time

from continuum import Continuum, TaskContext
from samples.states.research import Message, ModelReply, Research, ToolCall

app = Continuum()

TOOLS = ("search", "fetch", "calculate")


def _digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


def _pause(scale: float, low_s: float, high_s: float, *seed: object) -> None:
    """Take a deterministic, seeded amount of time between ``low_s`` and ``high_s``."""
    span = (_digest(*seed) % 1000) / 1000
    time.sleep(scale * (low_s + span * (high_s - low_s)))


@app.step
def call_model(topic: str, messages: list[Message], max_turns: int, scale: float) -> ModelReply:
    """The fake model: asks for one to three tools per turn, then writes the report."""
    turn = sum(1 for m in messages if m.role == "assistant")
    _pause(scale, 0.25, 0.6, "model", topic, turn)
    findings = [m.content for m in messages if m.role == "tool"]
    if turn + 1 >= max_turns:
        lines = "\n".join(f"- {f}" for f in findings)
        return ModelReply(
            text=f"Report on {topic} ({len(findings)} findings):\n{lines}", final=True
        )
    wanted = 1 + _digest("calls", topic, turn) % 3
    calls = [
        ToolCall(
            tool=TOOLS[_digest("tool", topic, turn, i) % len(TOOLS)],
            argument=f"{topic} #{turn}.{i}",
        )
        for i in range(wanted)
    ]
    return ModelReply(
        text=f"Turn {turn}: looking into {topic} with {wanted} tool calls.", tool_calls=calls
    )


@app.step
def run_tool(call: ToolCall, scale: float) -> str:
    """The fake tools: each takes its time and returns a deterministic finding."""
    _pause(scale, 0.1, 0.5, "tool", call.tool, call.argument)
    return f"{call.tool}({call.argument!r}) -> {_digest(call.tool, call.argument) % 10_000:04d}"


@app.task(state=Research)
def research(ctx: TaskContext[Research]) -> str | None:
    """One turn: ask the model, run the tools it asks for, and stop when it answers."""
    s = ctx.state
    reply = call_model(s.topic, s.messages, s.max_turns, s.latency_scale)
    s.messages.append(Message(role="assistant", content=reply.text))
    if reply.final:
        return reply.text
    for call in reply.tool_calls:
        s.messages.append(Message(role="tool", content=run_tool(call, s.latency_scale)))
    return None
