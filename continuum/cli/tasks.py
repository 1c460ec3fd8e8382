"""continuum start, status and resume: tasks on a deployed stack or on continuum dev.

Only ``start`` needs the app (it checks the input against the task's state model): it reads a
plain declaration from the app module's source and imports only the model's module
(``continuum.cli.declaration``), else it imports the app. ``status`` and ``resume`` need just
the stack, so a broken or absent app never hides a task.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from continuum.cli import declaration
from continuum.cli.common import (
    JSON_SOURCES,
    CliError,
    Stack,
    add_app_option,
    add_stack_options,
    app_target,
    explain,
    load_app,
    parse_input,
)


def register(commands: Any) -> None:
    """Add start, status and resume to the ``continuum`` command."""
    start = commands.add_parser(
        "start",
        help="start a task on a deployed stack or on continuum dev; prints its id",
        description="Start a task and print its id. Starting the same --task-id again starts "
        "nothing new. The input is checked against the task's state model before anything is "
        "written: when the app is APP = Continuum(...) with literal arguments and the task "
        "@APP.task(state=Model, ...) with Model imported from another module, and the app "
        "module's top level only imports (no module of the project but Model's), definitions, "
        "values and calls of installed packages, start reads the app's source and imports only "
        "Model's module; otherwise it imports the app.",
    )
    start.add_argument("task", metavar="TASK", help="the task's name")
    start.add_argument("--input", default="{}", help=f"the task's input state, {JSON_SOURCES}")
    start.add_argument("--task-id", default=None, help="the id to give it (default: a new one)")
    add_app_option(start)
    add_stack_options(start)
    start.set_defaults(func=cmd_start)

    status = commands.add_parser(
        "status",
        help="show a task's status, counters, and its result or error (needs no app)",
        description="Print a task's status as JSON: status, generation, turn, counters, and "
        "its result or error once it finished.",
    )
    status.add_argument("task_id", metavar="TASK_ID")
    add_stack_options(status, queue=False)
    status.set_defaults(func=cmd_status)

    resume = commands.add_parser(
        "resume",
        help="send a task's current continuation again (always safe; needs no app)",
        description="Send the continuation of a task's current generation again: after "
        "restoring a record by hand, or when a task seems stuck. The record fences it like "
        "any duplicate, so a running or finished task is not disturbed.",
    )
    resume.add_argument("task_id", metavar="TASK_ID")
    add_stack_options(resume)
    resume.set_defaults(func=cmd_resume)


def cmd_start(args: argparse.Namespace) -> int:
    """``continuum start TASK``: print the new task's id."""
    from continuum.backends.queue import QueueError
    from continuum.errors import ContinuumError

    stack = Stack.from_args(args)
    stack.need_bucket()
    stack.need_queue()
    payload = parse_input(args.input)
    target = app_target(args.app, "start")
    declared = declaration.read_declaration(target, args.task)
    if declared is not None and not declaration.settles(declared, payload):
        declared = None
    app = load_app(target) if declared is None else declared.app
    stack.configure(app)
    task_id = args.task_id or uuid.uuid4().hex
    client = app.client()
    try:
        if declared is None:
            client.start(args.task, payload, task_id=task_id)
        else:
            client.start_declared(
                declared.name, declared.state_model, declared.version, payload, task_id=task_id
            )
    except ContinuumError as exc:
        if args.task_id is None and exc.task_id == task_id:
            exc.task_id = None  # a refusal created nothing: the generated id names no task
            raise CliError(exc.rendered()) from None
        raise
    except QueueError as exc:
        # The record exists; only its first continuation is missing.
        why = explain(exc, stack) or str(exc)
        raise CliError(
            f"task {task_id} was created, but its first continuation was not sent: {why}. "
            f"Once the queue is right: continuum resume {task_id}"
        ) from None
    print(task_id)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``continuum status TASK_ID``: the task's status as JSON."""
    print(Stack.from_args(args).client().status(args.task_id).model_dump_json(indent=2))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    """``continuum resume TASK_ID``: send its current continuation again."""
    stack = Stack.from_args(args)
    stack.need_queue()
    client = stack.client()
    status = client.status(args.task_id).status
    if status.finished:
        print(f"task {args.task_id} has finished ({status.value}): nothing to resume")
        return 0
    generation = client.resume(args.task_id)
    print(f"sent the continuation of generation {generation} of {args.task_id}")
    return 0
