"""continuum worker: run continuations outside Lambda (ECS, EC2, a laptop) until SIGTERM."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from continuum.cli.common import (
    CREATE_HINT,
    CliError,
    Stack,
    add_app_argument,
    add_stack_options,
    app_target,
    budget_option,
    count,
    grace_seconds,
    load_app,
    terminal_safe,
)

if TYPE_CHECKING:
    from continuum._ops.client import Client


def register(commands: Any) -> None:
    """Add worker to the ``continuum`` command."""
    from continuum._local.worker_defaults import DEFAULT_BUDGET_S, DEFAULT_GRACE_S, POLL_WAIT_S

    worker = commands.add_parser(
        "worker",
        help="run continuations outside Lambda: long-poll the queue until SIGTERM",
        description="Long-poll the continuation queue and run each continuation as a Lambda "
        "invocation of --budget seconds would, --concurrency at a time. On SIGTERM or Ctrl-C "
        "it takes no new message; each running task goes on with the steps that fit in "
        "--grace seconds (less 2 s to exit), suspends before the first that does not, and "
        "the worker exits 0. Killed instead, nothing is lost: the records fence it as they "
        "fence a killed Lambda.",
    )
    add_app_argument(worker)
    budget_option(
        worker, default=DEFAULT_BUDGET_S, help="seconds per message, as a Lambda timeout "
        "(default: %(default)g)",
    )  # fmt: skip
    worker.add_argument(
        "--concurrency",
        type=count,
        default=1,
        metavar="N",
        help="messages run at once (default: 1)",
    )
    worker.add_argument(
        "--grace",
        type=grace_seconds,
        default=DEFAULT_GRACE_S,
        metavar="SECONDS",
        help="seconds to suspend what runs after SIGTERM (default: %(default)g, for ECS's "
        "30 s stop timeout; Spot gives 120)",
    )
    worker.add_argument(
        "--dead-letter-queue-url",
        default=None,
        metavar="URL",
        help="also mark the tasks of this dead-letter queue failed, as the stack's "
        "dead-letter function does",
    )
    worker.add_argument(
        "--poll-wait", type=int, default=POLL_WAIT_S, choices=range(21), metavar="0-20",
        help="seconds each receive long-polls (default: %(default)s)",
    )  # fmt: skip
    worker.add_argument(
        "--log-level", default=None, metavar="LEVEL", help="the worker's JSON log level (default: "
        "$POWERTOOLS_LOG_LEVEL or INFO)",
    )  # fmt: skip
    worker.add_argument(
        "--progress", action="store_true", help="print one line per message that moved a "
        "task: the task, its status and why it suspended",
    )  # fmt: skip
    # For continuum dev: stop (with the grace period) when the process that started it exits.
    worker.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    add_stack_options(worker)
    worker.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    """``continuum worker MODULE:APP``: poll until stopped; 0 when everything suspended."""
    import os

    from continuum._local.runtime import sync_local_schedules
    from continuum._local.shutdown import Shutdown, stop_on_signals
    from continuum._local.standalone import DEAD_LETTER_BUDGET_S, QueueWorker
    from continuum._worker.sqs_batch import logger

    stack = Stack.from_args(args)
    target = app_target(args.app, "worker")
    sqs = stack.boto_client("sqs")
    continuations = _source(stack, sqs, stack.need_queue(), "continuations")
    _check_bucket(stack)
    app = load_app(target)
    stack.configure(app)
    app.settings  # noqa: B018 - read the signing keys now: a bad one is an error at start
    if args.exit_with_parent:  # under continuum dev, whose firer fires the app's schedules
        _serve_the_dev_stack(app)
        sync_local_schedules(app, memory=False)
    if args.log_level:
        logger.setLevel(args.log_level.upper())
    sources = [continuations(app.handler, args.budget, args.concurrency)]
    if args.dead_letter_queue_url:
        dead = _source(stack, sqs, args.dead_letter_queue_url, "dead letters")
        sources.append(dead(app.dead_letter_handler, DEAD_LETTER_BUDGET_S, 1))
    shutdown = Shutdown()
    progress = Progress(stack.client()) if args.progress else None
    worker = QueueWorker(
        sources,
        shutdown=shutdown,
        poll_wait_s=args.poll_wait,
        on_processed=progress.show if progress else None,
        parent_pid=os.getppid() if args.exit_with_parent else None,
        grace_s=args.grace,
    )
    tasks = ", ".join(sorted(app.tasks)) or "none"
    _say(
        f"continuum worker: {target} (tasks: {tasks}) on {stack.queue_url}, "
        f"{args.concurrency} at a time, {args.budget:g}s per message, {args.grace:g}s grace"
    )
    with stop_on_signals(shutdown, grace_s=args.grace):
        code = worker.run()
    left = worker.running()
    _say(
        f"continuum worker: stopped ({shutdown.reason}); "
        + (f"still running at the end of the grace period: {', '.join(left)}" if left else
           "nothing left running")
        + (f"; {worker.error}" if worker.error else "")
    )  # fmt: skip
    return code


def _serve_the_dev_stack(app: Any) -> None:
    """Under ``continuum dev``: sign with the stack's key and link to its pages, whatever the
    app's code gives. The second terminal's ``continuum start``, the pages' answers and the
    links all use the stack's export line; an app's own key (kept for messages signed with it)
    and callback URL are for the deployed stack."""
    import os

    from continuum._base.signing_keys import SIGNING_KEY_ENV, split_keys

    stack_key = os.environ.get(SIGNING_KEY_ENV, "").strip()
    if not stack_key:
        return
    ours = split_keys(stack_key, source=SIGNING_KEY_ENV)
    theirs = tuple(key for key in app.settings.signing_keys if key not in ours)
    links = os.environ.get("CONTINUUM_CALLBACK_URL") or app.settings.callback_url
    app.update_settings(signing_keys=ours + theirs, callback_url=links)


def _source(stack: Stack, sqs: Any, url: str, name: str) -> Any:
    """Check that the queue exists; return a maker of its QueueSource."""
    from botocore.exceptions import ClientError

    from continuum._local.standalone import QueueSource, queue_arn_and_visibility
    from continuum.backends.sqs import SQSContinuationQueue
    from continuum.cli.common import explain

    try:
        arn, visibility_s = queue_arn_and_visibility(sqs, url)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if "NonExistentQueue" in code or code == "QueueDoesNotExist":
            raise CliError(f"the {name} queue {url!r} does not exist: {CREATE_HINT}") from None
        raise CliError(explain(exc, stack) or str(exc)) from None
    queue = SQSContinuationQueue(sqs, url)

    def make(handler: Any, budget_s: float, slots: int) -> QueueSource:
        if visibility_s < budget_s:
            _say(
                f"warning: the {name} queue's visibility timeout ({visibility_s}s) is shorter "
                f"than --budget ({budget_s:g}s): a message may come back while it runs "
                "(the record fences it); the stack sets 6 x the budget"
            )
        return QueueSource(name, queue, arn, handler, budget_s, slots=slots)

    return make


def _check_bucket(stack: Stack) -> None:
    from botocore.exceptions import ClientError

    bucket = stack.need_bucket()
    try:
        stack.boto_client("s3").head_bucket(Bucket=bucket)
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchBucket"):
            raise CliError(f"the bucket {bucket!r} does not exist: {CREATE_HINT}") from None
        # 403: this identity may not list the bucket; its first record read will tell.


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """One line per processed message: time, task, status, and why it suspended."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.lock = threading.Lock()

    def show(self, processed: Any) -> None:
        from datetime import UTC, datetime, timedelta

        from continuum.errors import ContinuumError, RecordNotFoundError

        began = datetime.now(UTC) - timedelta(seconds=processed.seconds)
        where = ""  # a failed task's traceback, under its line
        fired = f"schedule {processed.schedule!r} fired: " if processed.schedule else ""
        if processed.task_id is None:
            line = f"a message that names no task ({processed.source})"
        else:
            try:
                status = self.client.status(processed.task_id)
            except RecordNotFoundError as exc:
                why = "the fire failed" if processed.failed else "the previous run is unfinished"
                line = f"{fired}no run started ({why})" if fired else f"task {exc.task_id}: {exc}"
            except ContinuumError as exc:
                line = f"task {processed.task_id}: {exc}"
            else:
                if status.updated_at < began and not processed.failed:
                    # The message found nothing to do (a late wake, a duplicate, a task that
                    # had finished): the record did not move, and its line is already out.
                    return
                counters = status.counters
                line = (
                    f"{fired}task {status.task_id} {status.task_name}: {status.status.value}, "
                    f"turn {status.turn}, {counters.invocations} invocations, "
                    f"{counters.steps_executed} steps"
                )
                if status.suspend_reason and status.status.value == "suspended":
                    line += f" (suspended: {status.suspend_reason})"
                if status.error:
                    line += f": {status.error.message}"
                    if status.error.traceback:
                        where = "".join(f"\n    {t}" for t in status.error.traceback.splitlines())
        if processed.source != "continuations":
            line = f"{processed.source}: {line}"
        with self.lock:
            stamp = time.strftime("%H:%M:%S")
            said = terminal_safe(f"{line} [{processed.seconds:.2f}s]{where}")
            print(f"{stamp} {said}", flush=True)
