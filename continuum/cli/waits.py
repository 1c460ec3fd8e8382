"""continuum signal, cancel and callback: what the outside world sends a task.

None of them needs the app: each writes to the task's inbox and wakes it (``_waits/answers.py``),
on a deployed stack or on ``continuum dev`` (``--endpoint-url`` or ``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from continuum.cli.common import (
    JSON_SOURCES,
    CliError,
    Stack,
    add_stack_options,
    parse_input,
)

if TYPE_CHECKING:
    from continuum._ops.client import Client


def register(commands: Any) -> None:
    """Add signal, cancel and callback to the ``continuum`` command."""
    signal = commands.add_parser(
        "signal",
        help="send a signal to a task's mailbox (kept until a wait takes it)",
        description="Send signal NAME with a JSON payload to a task. It is kept until a "
        "ctx.wait_for_signal(NAME) takes it, oldest first; the same --signal-id twice is "
        "delivered once.",
    )
    signal.add_argument("task_id", metavar="TASK_ID")
    signal.add_argument("name", metavar="NAME")
    signal.add_argument("--payload", default="null", help=f"the payload, {JSON_SOURCES}")
    signal.add_argument("--signal-id", default=None, help="an id that makes the send idempotent")
    add_stack_options(signal)
    signal.set_defaults(func=cmd_signal)

    cancel = commands.add_parser(
        "cancel",
        help="cancel a task (it may clean up, then ends cancelled)",
        description="Ask a task to stop: it sees TaskCancelledError at its next step, wait or "
        "turn boundary (a waiting or suspended task is woken for it) and ends cancelled. The "
        "first reason wins.",
    )
    cancel.add_argument("task_id", metavar="TASK_ID")
    cancel.add_argument("--reason", default=None, help="why (shown in its status)")
    add_stack_options(cancel)
    cancel.set_defaults(func=cmd_cancel)

    callback = commands.add_parser(
        "callback",
        help="complete, fail or heartbeat a task's callback",
        description="Answer a callback a task created (ctx.create_callback); the id is the "
        "one cb.id gave, as continuum status lists it.",
    )
    actions = callback.add_subparsers(dest="action", required=True, metavar="ACTION")
    complete = actions.add_parser("complete", help="complete it with a JSON result")
    complete.add_argument("callback_id", metavar="ID")
    given = complete.add_mutually_exclusive_group()
    given.add_argument("--result", default="null", help=f"the result, {JSON_SOURCES}")
    given.add_argument(
        "--answer",
        default=None,
        metavar="READY",
        help="send the callback's ready answer READY (its request lists them: approve, deny)",
    )
    fail = actions.add_parser("fail", help="fail it: cb.result() raises CallbackFailedError")
    fail.add_argument("callback_id", metavar="ID")
    fail.add_argument("--error-type", default="CallbackFailed", help="the error's type")
    fail.add_argument("--message", default="failed by an operator", help="the error's message")
    heartbeat = actions.add_parser("heartbeat", help="keep it alive (its heartbeat_timeout)")
    heartbeat.add_argument("callback_id", metavar="ID")
    for action in (complete, fail, heartbeat):
        add_stack_options(action)
        action.set_defaults(func=cmd_callback)


def cmd_signal(args: argparse.Namespace) -> int:
    stack = Stack.from_args(args)
    stack.need_queue()
    payload = parse_input(args.payload, flag="--payload")
    signal_id = stack.client().signal(args.task_id, args.name, payload, signal_id=args.signal_id)
    print(f"sent signal {args.name!r} ({signal_id}) to {args.task_id}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    stack = Stack.from_args(args)
    stack.need_queue()
    stack.client().cancel(args.task_id, args.reason)
    print(
        f"asked {args.task_id} to cancel (it sees the request at its next step, wait or turn); "
        f"`continuum status {args.task_id}` shows when it has ended"
    )
    return 0


def cmd_callback(args: argparse.Namespace) -> int:
    stack = Stack.from_args(args)
    client = stack.client()
    if args.action == "heartbeat":
        client.heartbeat_callback(args.callback_id)
        print(f"heartbeat sent for {args.callback_id}")
        return 0
    stack.need_queue()
    if args.action == "complete":
        if args.answer is not None:
            result = _ready(client, args.callback_id, args.answer)
        else:
            result = parse_input(args.result, flag="--result")
        client.complete_callback(args.callback_id, result)
        print(f"completed {args.callback_id}")
    else:
        client.fail_callback(args.callback_id, args.error_type, args.message)
        print(f"failed {args.callback_id}")
    return 0


def _ready(client: Client, callback_id: str, name: str) -> Any:
    """The ready answer ``name`` of the open callback ``callback_id``."""
    from continuum.cli.answers import ready_answer

    task_id = callback_id.rpartition(".")[0]
    for waiter in client.status(task_id).waiting_for if task_id else []:
        if waiter.id == callback_id:
            return ready_answer(waiter.request, name, callback_id)
    raise CliError(f"callback {callback_id} is not open: `continuum status TASK_ID` lists those")
