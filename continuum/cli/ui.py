"""continuum ui: the pages of ``continuum dev`` against a deployed stack, for its operator.

It serves the task list, each task's timeline (its children, waits, error and state), and the
forms that complete a callback, send a signal, cancel a task and retry a failed one, on
127.0.0.1, reading the stack's bucket with the operator's own AWS credentials. Every action
is a client call (``continuum._ops``), as the CLI's: an answer, a signal or a cancel request
is written to the task's inbox, never to its record. The pages are
``continuum.timeline.server``'s, private: every read as well as every POST needs the token
made at start (the URL it prints carries it once; the browser then holds it in a cookie), and
a request with another ``Host`` or ``Origin`` is refused.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from continuum.cli.common import Stack, add_stack_options

#: The pages' default port (``continuum dev``'s, so a bookmark works for both).
UI_PORT = 5050
#: How often the command looks for Ctrl-C.
WAKE_EVERY_S = 0.3


def register(commands: Any) -> None:
    """Add ui to the ``continuum`` command."""
    ui = commands.add_parser(
        "ui",
        help="the timeline pages of a deployed stack's tasks, on 127.0.0.1 (needs no app)",
        description="Serve the task list and each task's timeline (children, waits, error, "
        "state) with forms that complete callbacks, send signals, cancel and retry, against "
        "the stack the flags or the environment name, with your AWS credentials. Ctrl-C "
        "stops it.",
    )
    ui.add_argument(
        "--port",
        type=int,
        default=UI_PORT,
        metavar="PORT",
        help="the port on 127.0.0.1 (default: %(default)s; 0 picks a free one)",
    )
    add_stack_options(ui)
    ui.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    """``continuum ui``: serve until Ctrl-C; 0 when stopped."""
    from continuum.cli.dev import dev_ports
    from continuum.timeline.server import TimelineServer

    port, _ = dev_ports(args.port, 0)
    stack = Stack.from_args(args)
    stack.need_queue()  # its forms write to an inbox and then wake the task: both, or neither
    client = stack.client()
    # A missing bucket or credentials fail here, in one line, not on the first page.
    stack.boto_client("s3").head_bucket(Bucket=stack.need_bucket())
    with TimelineServer(client, port=port or 0, name="continuum ui", private=True) as pages:
        print(
            f"continuum ui: the tasks of s3://{stack.need_bucket()} at {pages.open_url}\n"
            "  (tasks, their timelines and children; answer callbacks, signal, cancel, retry)\n"
            "Ctrl-C stops it.",
            flush=True,
        )
        try:
            while True:
                time.sleep(WAKE_EVERY_S)
        except KeyboardInterrupt:
            print("continuum ui: stopped", flush=True)
    return 0
