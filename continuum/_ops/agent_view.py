"""An agent task as what it is: its model requests, tool calls and approvals, in order.

The pydantic-ai integration journals each model request as a step named
``{agent}__model.request``, each tool call as ``{...}.call_tool:{tool}`` (the model's response
before it holds the call's arguments), and each approval as a callback ``approve.{tool}``
with a ``.submit`` step (what was asked) and a ``.result`` entry (the answer). These names are
compatibility data (``tests/integrations`` pins them), so they are read here by pattern: a
task whose journal holds none of them has no agent view. Child contexts (an awaited agent's
``run#3/_run_coro#2/...``) are walked in order; they are how the journal keys concurrent
calls, not something a person asked for.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from continuum._record.model import JournalEntry, walk_with_paths

MODEL_REQUEST = "model.request"
TOOL_CALL = ".call_tool:"
APPROVAL = "approve."


class AgentEvent(BaseModel):
    """One thing an agent did: a model request, a tool call or an approval."""

    kind: Literal["model_request", "tool_call", "approval"]
    #: the journal key (with its child contexts' path) it comes from.
    key: str
    #: the tool called or to approve (a tool call, an approval).
    tool: str | None = None
    #: the model's name (a model request).
    model: str | None = None
    #: what the model said (its text parts), and the tool calls it asked for.
    text: str | None = None
    tool_calls: list[dict[str, Any]] = []
    #: a tool call's (or an approval's) arguments, and its result.
    args: Any = None
    result: Any = None
    #: an approval's answer: "approved", "denied" or "waiting".
    decision: str | None = None
    #: what the person who answered an approval said with it (the model reads it).
    comment: str | None = None
    #: the error, when the step failed.
    error: str | None = None


def agent_events(journal: list[JournalEntry], load: Callable[[str], Any]) -> list[AgentEvent]:
    """The agent events of a turn's journal, in order (none: not an agent task).
    ``load(sha256)`` reads a result kept in a blob."""
    events: list[AgentEvent] = []
    asked: list[dict[str, Any]] = []  # the tool calls of the last response not yet seen
    approvals: dict[str, AgentEvent] = {}
    for path, entry in walk_with_paths(journal):
        key, name = path + entry.key, entry.name
        result = _result(entry, load)
        error = f"{entry.error.type}: {entry.error.message}" if entry.error else None
        if entry.kind == "step" and name.endswith(MODEL_REQUEST):
            calls = [_call(part) for part in _parts(result) if _kind(part) == "tool-call"]
            texts = [str(part.get("content")) for part in _parts(result) if _kind(part) == "text"]
            asked = list(calls)
            events.append(
                AgentEvent(
                    kind="model_request",
                    key=key,
                    error=error,
                    tool_calls=calls,
                    model=result.get("model_name") if isinstance(result, dict) else None,
                    text="\n".join(texts) or None,
                )
            )
        elif entry.kind == "step" and TOOL_CALL in name:
            tool = name.rpartition(TOOL_CALL)[2]
            args = _take(asked, tool)
            value = result.get("result") if isinstance(result, dict) else result
            events.append(
                AgentEvent(
                    kind="tool_call", key=key, tool=tool, args=args, result=value, error=error
                )
            )
        elif name.startswith(APPROVAL):
            _approval(events, approvals, key, entry, result)
    return events


def _approval(
    events: list[AgentEvent],
    approvals: dict[str, AgentEvent],
    key: str,
    entry: JournalEntry,
    result: Any,
) -> None:
    """The callback opens an approval; its ``.submit`` step says what was asked, its
    ``.result`` entry the answer."""
    name = entry.name
    if entry.kind == "callback":
        opened = AgentEvent(kind="approval", key=key, tool=name[len(APPROVAL) :],
                            decision="waiting")  # fmt: skip
        approvals[name] = opened
        events.append(opened)
        return
    callback, _, part = name.rpartition(".")
    event = approvals.get(callback)
    if event is None:
        return
    if part == "submit":
        event.args = result.get("args") if isinstance(result, dict) else None
    elif part == "result" and not entry.partial and result is not None:
        approved = isinstance(result, dict) and result.get("approved") is True
        event.decision = "approved" if approved else "denied"
        event.result = result
        comment = result.get("message") if isinstance(result, dict) else None
        event.comment = comment if isinstance(comment, str) and comment else None


def _result(entry: JournalEntry, load: Callable[[str], Any]) -> Any:
    if entry.result_ref is None:
        return entry.result
    try:
        return load(entry.result_ref.sha256)
    except Exception:  # a blob gone or unreadable: the event without its result
        return None


def _parts(response: Any) -> list[dict[str, Any]]:
    parts = response.get("parts") if isinstance(response, dict) else None
    return [part for part in parts or [] if isinstance(part, dict)]


def _kind(part: dict[str, Any]) -> Any:
    return part.get("part_kind")


def _call(part: dict[str, Any]) -> dict[str, Any]:
    args = part.get("args")
    if isinstance(args, str):  # a model may send its arguments as a JSON string
        with contextlib.suppress(ValueError):
            args = json.loads(args)
    return {"tool": part.get("tool_name"), "args": args}


def _take(asked: list[dict[str, Any]], tool: str) -> Any:
    """The arguments of the first call of ``tool`` the model asked for and no step took yet."""
    for index, call in enumerate(asked):
        if call["tool"] == tool:
            return asked.pop(index)["args"]
    return None
