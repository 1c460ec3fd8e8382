"""Approvals: a tool call that needs a person's yes waits on a continuum callback.

pydantic-ai defers a call to a tool registered with ``requires_approval=True`` (or one that
raises ``ApprovalRequired``) and asks the run's capabilities to decide it
(``handle_deferred_tool_calls``). Inside a task, ContinuumDurability decides it this way:

1. For each pending call, a callback ``approve.<tool>`` is created with its request (a title,
   a summary and the arguments as fields for the link's page; the tool, its arguments, the
   digest, the two ready answers ``approve`` and ``deny``, and the shape an
   answer must have), so ``continuum status``, ``inspect`` and the dev UI show what it asks,
   and ``client.complete_callback`` refuses an answer of another shape, or with another digest,
   before it is written. A step hands an :class:`ApprovalRequest` to ``notify``; it stays in
   the journal.
2. The task waits on the callbacks without compute (the record is ``waiting``).
3. An answer is an :class:`ApprovalAnswer`. A denial goes back to the model as pydantic-ai's
   ``ToolDenied``. An approval counts only if its ``digest`` is this call's: the digest of the
   tool's name, its arguments and the callback's id, so a yes meant for another request (even
   one with the same tool and arguments), or for a retry with other arguments, never approves
   this one. An answer that reached the task unchecked (an older client) and does not fit is
   refused there, and the call is asked again with a fresh callback whose request says why
   (``refused``, shown by ``continuum status``); after ``MAX_REFUSED_ANSWERS`` refusals it is
   denied, saying why.
4. The approved call runs as an ``effect`` and ``at_most_once`` step (see ``_operations``).

The answers are journaled with the callbacks, and each answer is judged against the request
the journal recorded (what the person was shown), so a replayed turn takes the same decisions,
in the task or in a fork of it (whose callback ids name the fork: the digest binds the
callback's token, which a fork keeps, not the task's id).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from continuum._base.json_values import dump_json
from continuum._define.callbacks import Callback
from continuum._define.steps import as_step
from continuum._turn.context import TaskContext
from continuum.errors import CallbackFailedError, CallbackTimeoutError

#: Refused answers (a wrong digest, a malformed answer) after which a call is denied.
MAX_REFUSED_ANSWERS = 3
#: What the model reads when a person denied a call without saying why.
DENIED = "A person denied this call."
#: Characters a callback name may not hold (it is an S3 key segment), replaced in tool names.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class ApprovalRequest(BaseModel):
    """One tool call waiting for a person's decision, as ``notify`` receives it.

    Attributes:
        task_id: the task that waits.
        callback_id: answer with ``client.complete_callback(callback_id, answer)``.
        callback_name: the callback's name (``continuum run --answer NAME=JSON`` uses it).
        tool_name: the tool the model called.
        args: the arguments it called it with.
        tool_call_id: pydantic-ai's id of the call.
        digest: ``approval_digest(tool_name, args, callback_id)``; an approval must carry it.
        url: the callback's link, where a person approves or denies it (None: the app has
            no ``callback_url``; ``docs/approval-links.md``).
        refused: why the answers to the earlier requests of this call were refused (empty:
            this is the first).
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    callback_id: str
    callback_name: str
    tool_name: str
    args: dict[str, Any]
    tool_call_id: str
    digest: str
    url: str | None = None
    refused: tuple[str, ...] = ()

    def approve(self) -> dict[str, Any]:
        """The answer that approves this call (as JSON)."""
        return {"approved": True, "digest": self.digest}

    def deny(self, message: str = DENIED) -> dict[str, Any]:
        """The answer that denies this call, with the message the model reads (as JSON)."""
        return {"approved": False, "message": message}


class ApprovalAnswer(BaseModel):
    """A person's decision, the result a callback is completed with.

    ``{"approved": true, "digest": "sha256:..."}`` approves the call whose digest it is;
    ``{"approved": false, "message": "..."}`` denies it, and the model reads the message. An
    answer from the callback's link carries the person's ``comment`` too (the model reads it
    when they deny).
    """

    model_config = ConfigDict(extra="forbid")

    approved: bool
    digest: str | None = None
    message: str | None = None
    comment: str | None = None


def approval_digest(tool_name: str, args: dict[str, Any], callback_id: str) -> str:
    """The digest that binds an approval to one request: SHA-256 of the canonical JSON of the
    tool, its arguments and the callback's token (``callback_id`` less its task id: unguessable,
    unique to this request, and kept by a fork of the task, whose callback ids name the fork)."""
    token = callback_id.rsplit(".", 1)[-1]
    canonical = dump_json({"args": args, "callback": token, "tool": tool_name})
    return f"sha256:{hashlib.sha256(canonical).hexdigest()}"


def callback_request(
    tool_name: str,
    args: dict[str, Any],
    tool_call_id: str,
    callback_id: str,
    *,
    refused: Sequence[str] = (),
) -> dict[str, Any]:
    """What an approval callback asks, as its request: the call as a person reads it (the
    link page's ``title``, ``summary`` and ``fields``), and for machines the call itself, the
    ready answers and the shape an answer must have (``continuum._base.json_shapes``), so a
    client refuses any other; and why the answers to this call's earlier requests were
    refused, if any were."""
    digest = approval_digest(tool_name, args, callback_id)
    optional_text = {"type": ["string", "null"]}
    return {
        "title": humanised(tool_name),
        "summary": f"The agent asks to run {tool_name} with these arguments. Approve to let "
        "it run once; reject to tell the agent no (it reads your comment).",
        "fields": {humanised(name): value for name, value in args.items()},
        "tool": tool_name,
        "args": args,
        "tool_call_id": tool_call_id,
        "digest": digest,
        **({"refused": list(refused)} if refused else {}),
        "answers": {
            "approve": {"approved": True, "digest": digest},
            "deny": {"approved": False, "message": DENIED},
        },
        "expects": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "approved": {"const": True},
                        "digest": {"const": digest},
                        "message": optional_text,
                        "comment": optional_text,
                    },
                    "required": ["approved", "digest"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "approved": {"const": False},
                        "digest": optional_text,
                        "message": optional_text,
                        "comment": optional_text,
                    },
                    "required": ["approved"],
                    "additionalProperties": False,
                },
            ]
        },
    }


def humanised(name: str) -> str:
    """A tool's or an argument's name as a label: ``issue_refund`` -> ``Issue refund``."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    text = " ".join(words.split())
    return text[:1].upper() + text[1:].lower() if text else name


def print_request(request: ApprovalRequest) -> None:
    """The default ``notify``: say what waits for approval and how to answer (the log)."""
    answer = dump_json(request.approve()).decode()
    print(
        f"approval requested for {request.tool_name}({dump_json(request.args).decode()}) "
        f"in task {request.task_id}\n"
        f"  approve: continuum callback complete {request.callback_id} --answer approve\n"
        f"           (or --result '{answer}')\n"
        f"  deny:    continuum callback complete {request.callback_id} --answer deny\n"
        '           (or --result \'{"approved": false, "message": "why"}\')'
        + (f"\n  or open: {request.url}" if request.url else ""),
        flush=True,
    )


Notify = Callable[[ApprovalRequest], object]


def _submit(notify: Notify, request: ApprovalRequest) -> ApprovalRequest:
    """The step that hands a request out (its result, the request, stays in the journal)."""
    notify(request)
    return request


class Approvals:
    """Decides the approvals of one agent's tool calls inside a task."""

    def __init__(self, *, notify: Notify, timeout: timedelta | float | None) -> None:
        self.notify = notify
        self.timeout = timeout

    def decide(self, ctx: TaskContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        """Ask for every pending approval at once, then take the answers in order."""
        calls = list(requests.approvals)
        asked = [self._ask(ctx, call, ()) for call in calls]
        decisions: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call, (callback, request) in zip(calls, asked, strict=True):
            decisions[call.tool_call_id] = self._decision(ctx, call, callback, request)
        return requests.build_results(approvals=decisions)

    def _ask(
        self, ctx: TaskContext[Any], call: ToolCallPart, refused: Sequence[str]
    ) -> tuple[Callback, ApprovalRequest]:
        """Create the call's callback and hand its request out; return the callback and the
        request as the journal recorded it (what the person was shown: an answer is judged
        against it, in a replay or a fork as when it was asked)."""
        args = call.args_as_dict()
        name = f"approve.{_UNSAFE.sub('_', call.tool_name)}"[:128]
        asks = partial(
            callback_request, call.tool_name, args, call.tool_call_id, refused=tuple(refused)
        )
        callback = ctx.create_callback(name, timeout=self.timeout, request=asks)
        request = ApprovalRequest(
            task_id=ctx.task_id,
            callback_id=callback.id,
            callback_name=callback.name,
            tool_name=call.tool_name,
            args=args,
            tool_call_id=call.tool_call_id,
            digest=approval_digest(call.tool_name, args, callback.id),
            url=callback.url,
            refused=tuple(refused),
        )
        asked = ctx.step(as_step(partial(_submit, self.notify), name=f"{name}.submit"), request)
        return callback, asked

    def _decision(
        self,
        ctx: TaskContext[Any],
        call: ToolCallPart,
        callback: Callback,
        request: ApprovalRequest,
    ) -> ToolApproved | ToolDenied:
        refusals: list[str] = []
        while True:
            try:
                raw = callback.result()
            except CallbackTimeoutError as exc:
                return ToolDenied(f"No decision on this call arrived: {exc.message}")
            except CallbackFailedError as exc:
                return ToolDenied(f"The approval failed: {exc.message}")
            verdict = _judge(raw, request)
            if isinstance(verdict, ToolApproved | ToolDenied):
                return verdict
            refusals.append(verdict)
            if len(refusals) >= MAX_REFUSED_ANSWERS:
                return ToolDenied(
                    f"The call was not approved: {len(refusals)} answers were refused "
                    f"({'; '.join(refusals)})."
                )
            callback, request = self._ask(ctx, call, refusals)


def _judge(raw: object, request: ApprovalRequest) -> ToolApproved | ToolDenied | str:
    """What an answer decides, or why it is refused."""
    try:
        answer = ApprovalAnswer.model_validate(raw)
    except ValidationError as exc:
        return f"not an approval answer ({exc.error_count()} errors: {_first_error(exc)})"
    if not answer.approved:
        return ToolDenied(answer.comment or answer.message or DENIED)
    if answer.digest != request.digest:
        return (
            f"the approval's digest {answer.digest!r} is not this request's {request.digest!r} "
            f"({request.tool_name} with these arguments, asked on callback {request.callback_id})"
        )
    return ToolApproved()


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where: Sequence[object] = error.get("loc", ())
    return f"{'.'.join(map(str, where)) or 'answer'}: {error['msg']}"
