"""continuum run: run one task end to end locally, and show each invocation.

Two places to run it:

- **In this process** (the default): moto in memory, emulated invocations of ``--budget``
  seconds. Ctrl-C makes the running invocation's time run out, so the task suspends at its
  next step with its record saved; the run prints the task id and exits 130. The moto of this
  process goes with it.
- **On a server** (``--endpoint-url`` or ``AWS_ENDPOINT_URL``, as ``continuum dev`` prints):
  the task is started there and its workers run it; this command follows its record. Ctrl-C
  stops following (exit 130): the task goes on, and ``continuum status`` sees it later.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, NoReturn

from continuum.cli.common import (
    JSON_SOURCES,
    CliError,
    Stack,
    add_stack_options,
    budget_option,
    need_local_runtime,
    parse_input,
)
from continuum.cli.run_output import (
    InvocationPrinter,
    followed_json,
    generation_line,
    print_result,
    show_summary,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from continuum._app.app import Continuum
    from continuum._local.runtime import LocalRuntime
    from continuum._ops.client import Client
    from continuum._ops.status import TaskStatus
    from continuum._record.model import TaskRecord
    from continuum._turn.tasks import Task
    from continuum.cli.answers import Answers

#: The budget of an invocation in this process unless --budget says otherwise.
DEFAULT_RUN_BUDGET_S = 5.0
#: How often a run on a server reads the task's record.
FOLLOW_EVERY_S = 0.25
#: After this long with no worker taking the task, a run on a server says where to look.
NO_WORKER_HINT_S = 10.0


def register(commands: Any) -> None:
    """Add run to the ``continuum`` command."""
    run = commands.add_parser(
        "run",
        help="run a task end to end locally (moto) and show each invocation",
        description="Run a task end to end: in this process on moto, with invocations of "
        "--budget seconds, or on continuum dev when --endpoint-url (or AWS_ENDPOINT_URL) "
        "names it. Ctrl-C prints the task id and exits 130.",
    )
    run.add_argument("target", metavar="MODULE:TASK", help="the task, e.g. tides:word_count")
    run.add_argument("--input", default="{}", help=f"the task's input state, {JSON_SOURCES}")
    budget_option(
        run, default=None, help="seconds per invocation in this process (default: "
        f"{DEFAULT_RUN_BUDGET_S:g}; on a server, its workers' budget applies)",
    )  # fmt: skip
    run.add_argument("--task-id", default=None, help="the id to give it (default: a new one)")
    run.add_argument("--json", action="store_true", help="end with a JSON summary line")
    run.add_argument("--verbose", action="store_true", help="show the worker's JSON logs")
    run.add_argument(
        "--real-time",
        action="store_true",
        help="wait in real time (default: a virtual clock that jumps to the next timer)",
    )
    run.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="complete the callback NAME with this JSON result when the task waits for it "
        "(repeat for several; without one, a terminal run asks)",
    )
    run.add_argument(
        "--signal",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="send signal NAME with this JSON payload right after the start (repeatable)",
    )
    add_stack_options(run)
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """``continuum run MODULE:TASK``: 0 if the task succeeded, 1 if not, 130 on Ctrl-C."""
    from continuum._app.loading import load_target
    from continuum._turn.tasks import Task

    payload = parse_input(args.input)
    stack = Stack.from_args(args)
    if stack.endpoint_url is None:
        need_local_runtime()
    task: Task[Any] = load_target(args.target, Task, what="MODULE:TASK")
    app = _owner_app(task)
    task_id = args.task_id or uuid.uuid4().hex
    if not args.verbose:
        from continuum._worker import sqs_batch as batch

        # The worker logs JSON lines for CloudWatch; a terminal run shows its own progress.
        batch.logger.setLevel("ERROR")
    if stack.endpoint_url is None:
        return _run_here(args, app, task, payload, task_id)
    return _follow(args, stack, app, task, payload, task_id)


def _run_here(
    args: argparse.Namespace, app: Continuum, task: Task[Any], payload: Any, task_id: str
) -> int:
    from continuum._local.runtime import LocalRuntime, moto_backend
    from continuum.cli.answers import Answers

    budget = args.budget or DEFAULT_RUN_BUDGET_S
    answers = Answers.from_args(args)
    with moto_backend():
        runtime = LocalRuntime(
            app, budget_s=budget, virtual_time=not args.real_time, scheduler=True
        )
        clock = "real time" if args.real_time else "a virtual clock (waits take no time)"
        print(
            f"running {task.name} as task {task_id} on moto in this process, {budget:g}s per "
            f"invocation, on {clock} (Ctrl-C suspends it)",
            flush=True,
        )
        started = time.monotonic()
        printer = InvocationPrinter(budget)
        record = _drive_here(runtime, task, payload, task_id, printer, answers)
        if isinstance(record, int):
            return record
        if not record.status.finished:
            print(
                f"\ninterrupted: task {task_id} is {record.status.value} at turn {record.turn} "
                f"(generation {record.generation}), its record saved. This run's moto ends "
                "with it: to keep tasks, run `continuum dev` and `continuum run` with the "
                "export line it prints",
                flush=True,
            )
            return 130
        summary = runtime.summary(
            record, overruns=printer.overruns, seconds=time.monotonic() - started
        )
    print_result(summary.status, summary.task_id, summary.result, summary.error, summary.traceback)
    show_summary(summary, json_line=args.json)
    return 0 if summary.status == "succeeded" else 1


def _drive_here(
    runtime: LocalRuntime,
    task: Task[Any],
    payload: Any,
    task_id: str,
    printer: InvocationPrinter,
    answers: Answers,
) -> TaskRecord | int:
    """Start the task and drive it, answering what it waits for, until it ends or Ctrl-C:
    its record then, or the exit code of a run that cannot go on."""
    from continuum._local.shutdown import InvocationContext, Shutdown, stop_on_signals

    shutdown = Shutdown()
    with (
        runtime.time.running(),
        stop_on_signals(shutdown, grace_s=0, signals=(signal.SIGINT,), again=_interrupt),
    ):
        try:
            client = runtime.app.client()
            client.start(task.name, payload, task_id=task_id)
            answers.send_signals(client, task_id)
            while True:
                runtime.drive(
                    task_id,
                    on_invocation=printer.show,
                    context=lambda: InvocationContext(runtime.budget_s, shutdown),
                    should_stop=lambda: shutdown.requested,
                )
                printer.flush()
                record = runtime.record(task_id)
                if record.status.finished or shutdown.requested:
                    return record
                if not answers.answer(client, record):
                    return answers.stranded(record)
        except KeyboardInterrupt:  # a second Ctrl-C: stop at once, mid-step
            print(f"\ninterrupted: task {task_id} was stopped mid-invocation", flush=True)
            return 130


def _follow(
    args: argparse.Namespace,
    stack: Stack,
    app: Continuum,
    task: Task[Any],
    payload: Any,
    task_id: str,
) -> int:
    from continuum._local.shutdown import Shutdown, stop_on_signals
    from continuum._record.model import Status

    stack.need_bucket()
    stack.need_queue()
    stack.configure(app)
    client = app.client()
    started = time.monotonic()
    client.start(task.name, payload, task_id=task_id)
    print(
        f"started {task.name} as task {task_id} on {stack.endpoint_url}; following it "
        "(Ctrl-C stops following, the task goes on)",
        flush=True,
    )
    if args.budget is not None:
        print("note: --budget applies in this process only; the server's workers use theirs")
    # Ctrl-C asks the loop to stop between polls (a second one interrupts at once), as in the
    # local run: an interrupt raised inside a poll's HTTP call could be lost there.
    shutdown = Shutdown()
    with stop_on_signals(shutdown, grace_s=0, signals=(signal.SIGINT,), again=_interrupt):
        status = _watch(client, task_id, started, lambda: shutdown.requested)
    if status is None:
        print(
            f"\nstopped following task {task_id}; it goes on at {stack.endpoint_url}: "
            f"continuum status {task_id}",
            flush=True,
        )
        return 130
    error = status.error.message if status.error else None
    where = status.error.traceback if status.error else None
    print_result(status.status.value, task_id, status.result, error, where)
    if args.json:
        print(followed_json(task_id, status, error, time.monotonic() - started), flush=True)
    return 0 if status.status == Status.SUCCEEDED else 1


def _watch(
    client: Client, task_id: str, started: float, stopped: Callable[[], bool]
) -> TaskStatus | None:
    """Print a line for each generation the server's workers make, until the task finishes;
    return its last status (None: ``stopped()`` said so first)."""
    from continuum._record.model import Status

    seen: tuple[Any, ...] | None = None
    hinted = False
    while not stopped():
        status = client.status(task_id)
        now = (status.status, status.generation, status.counters.invocations)
        if now != seen:
            print(generation_line(status), flush=True)
            seen = now
        if status.status.finished:
            return status
        waited = time.monotonic() - started
        if not hinted and status.status == Status.PENDING and waited > NO_WORKER_HINT_S:
            print(f"no worker has taken it in {waited:.0f}s: is `continuum dev` running?")
            hinted = True
        time.sleep(FOLLOW_EVERY_S)
    return None


def _owner_app(task: Task[Any]) -> Continuum:
    """The app that registered ``task`` (found in the task's module)."""
    from continuum._app.app import Continuum

    module = sys.modules.get(task.fn.__module__)
    for value in vars(module).values() if module else ():
        if isinstance(value, Continuum) and value.tasks.get(task.name) is task:
            return value
    raise CliError(f"no Continuum app in {task.fn.__module__!r} registers {task.name!r}")


def _interrupt(_signal: signal.Signals) -> NoReturn:
    raise KeyboardInterrupt
