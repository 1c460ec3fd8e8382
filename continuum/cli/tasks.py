"""continuum start, status and resume: tasks on a deployed stack or on continuum dev.

Only ``start`` imports the app (it checks the input against the task's state model), and once
that left a fresh check in its cache (``input_cache``), not even ``start``; ``status`` and
``resume`` need just the stack, so a broken or absent app never hides a task.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

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
        "written: a start imports the app for it, and writes each task's check beside the "
        "app's module (__pycache__/MODULE.APP.continuum-start.json), which the next starts "
        "use instead of importing the app while every file the app loaded, the environment "
        "and the directory are unchanged. A model with code of its own (a validator, a "
        "serializer, an alias, a default factory) is checked by the app every time, and so "
        "is an input the cached check refuses.",
    )
    start.add_argument("task", metavar="TASK", help="the task's name")
    start.add_argument("--input", default="{}", help=f"the task's input state, {JSON_SOURCES}")
    start.add_argument("--task-id", default=None, help="the id to give it (default: a new one)")
    start.add_argument(
        "--no-input-cache",
        action="store_true",
        help="check the input with the app itself, not the kept check (for a state model "
        "that the app's import builds from something other than its Python files)",
    )
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
    from continuum.cli import input_cache

    stack = Stack.from_args(args)
    stack.need_bucket()
    stack.need_queue()
    payload = parse_input(args.input)
    target = app_target(args.app, "start")
    context = input_cache.context(target, stack_prefix=stack.prefix)
    task_id = args.task_id or uuid.uuid4().hex
    try:
        cached = None if args.no_input_cache else input_cache.load(target, context)
        task = cached.tasks.get(args.task) if cached else None
        state = task.state(payload) if task else None
        if cached and task and state is not None:
            stack.client(cached.limits).start_validated(
                task.name, state, task_id, state_version=task.version
            )
        else:
            app = load_app(target)
            stack.configure(app)
            app.client().start(args.task, payload, task_id=task_id)
            input_cache.save(target, context, app)
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
