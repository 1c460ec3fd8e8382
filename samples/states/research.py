"""The research agent's state model (see ``samples/states/__init__.py``)."""

from __future__ import annotations

from pydantic import BaseModel


class ToolCall(BaseModel):
    tool: str
    argument: str


class ModelReply(BaseModel):
    text: str
    tool_calls: list[ToolCall] = []
    final: bool = False


class Message(BaseModel):
    role: str
    content: str


class Research(BaseModel):
    """What the next worker must know: the topic and the conversation so far."""

    topic: str
    max_turns: int = 12
    latency_scale: float = 1.0
    messages: list[Message] = []
