"""continuum schedules list | sync | pause NAME | resume NAME | trigger NAME.

The app's recurring schedules (``app.schedule``) in the stack's EventBridge Scheduler group:
``sync`` makes the group's schedules what the app declares (run it after each deploy),
``list`` shows them with their next fire, last run and last skip, ``pause`` and ``resume``
disable and enable one, and ``trigger`` starts a run now. The group, the scheduler's role
and the queue's ARN come from flags or the environment the stack's ``CliEnvironment`` output
sets (``CONTINUUM_SCHEDULE_GROUP``, ``CONTINUUM_SCHEDULER_ROLE_ARN``, ``CONTINUUM_QUEUE_ARN``;
the queue's ARN is read from its URL when not given), as the bucket and queue are.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from continuum._app.backend_config import QUEUE_ARN_ENV, SCHEDULE_GROUP_ENV, SCHEDULER_ROLE_ENV
from continuum.cli.common import (
    CliError,
    Stack,
    add_app_option,
    add_stack_options,
    app_target,
    load_app,
)

if TYPE_CHECKING:
    from continuum._app.app import Continuum
    from continuum._define.recurring import ScheduleDeclaration
    from continuum.backends.eventbridge import EventBridgeScheduler


def register(commands: Any) -> None:
    """Add ``schedules`` and its actions to the ``continuum`` command."""
    schedules = commands.add_parser(
        "schedules",
        help="the app's recurring schedules: list, sync, pause, resume, trigger",
        description="The app's recurring schedules (app.schedule) in the stack's schedule "
        "group. Run sync after each deploy: it makes the group's schedules what the app "
        "declares.",
    )
    actions = schedules.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="each schedule: expression, time zone, state, next fire, last run, last skip",
        description="List the app's schedules and continuum's schedules in the group: "
        "expression, time zone, state, next fire (UTC), last run and last skipped fire.",
    )
    sync = actions.add_parser(
        "sync",
        help="make the group's schedules what the app declares (run it after each deploy)",
        description="Create the declared schedules that are missing, update the changed ones "
        "and delete the ones continuum made that the app no longer declares; a second sync "
        "changes nothing. The one-time schedules of waits are never touched, and a paused "
        "schedule stays paused.",
    )
    pause = actions.add_parser(
        "pause", help="disable a schedule: it does not fire until resumed (needs no app)"
    )
    resume = actions.add_parser(
        "resume", help="enable a schedule again, from its next time on (needs no app)"
    )
    trigger = actions.add_parser(
        "trigger",
        help="start a run now (its id: NAME-yyyymmddThhmmssZ, now; overlap applies)",
        description="Start one run of the schedule now, as a fire at this second would: its "
        "task id is NAME-yyyymmddThhmmssZ (now, UTC), and with overlap='skip' it starts "
        "nothing while the previous run has not finished.",
    )
    for action in (pause, resume, trigger):
        action.add_argument("name", metavar="NAME", help="the schedule's name (app.schedule)")
    for action in (listing, sync, trigger):
        add_app_option(action)
    for action in (listing, sync, pause, resume, trigger):
        add_stack_options(action, queue=action is not pause and action is not resume)
        _add_scheduler_options(action, role=action in (listing, sync))
    listing.set_defaults(func=cmd_list)
    sync.set_defaults(func=cmd_sync)
    pause.set_defaults(func=cmd_pause)
    resume.set_defaults(func=cmd_resume)
    trigger.set_defaults(func=cmd_trigger)


def _add_scheduler_options(parser: argparse.ArgumentParser, *, role: bool) -> None:
    group = parser.add_argument_group("where the schedules are (flags win over the environment)")
    group.add_argument(
        "--schedule-group", default=None, help=f"the schedule group (${SCHEDULE_GROUP_ENV})"
    )
    if role:
        group.add_argument(
            "--scheduler-role-arn",
            default=None,
            help=f"the role the schedules send with (${SCHEDULER_ROLE_ENV})",
        )
        group.add_argument(
            "--queue-arn",
            default=None,
            help=f"the continuation queue's ARN (${QUEUE_ARN_ENV}; default: read from its URL)",
        )


def _scheduler(args: argparse.Namespace, stack: Stack) -> EventBridgeScheduler:
    """The stack's EventBridge Scheduler group, from flags or the environment."""
    from continuum.backends.eventbridge import EventBridgeScheduler

    group = args.schedule_group or os.environ.get(SCHEDULE_GROUP_ENV)
    if not group:
        raise CliError(
            f"no schedule group: pass --schedule-group or set {SCHEDULE_GROUP_ENV} (the "
            "stack's CliEnvironment output sets it)"
        )
    role_arn = getattr(args, "scheduler_role_arn", None) or os.environ.get(SCHEDULER_ROLE_ENV)
    queue_arn = getattr(args, "queue_arn", None) or os.environ.get(QUEUE_ARN_ENV)
    if hasattr(args, "scheduler_role_arn"):
        if not role_arn:
            raise CliError(
                f"no scheduler role: pass --scheduler-role-arn or set {SCHEDULER_ROLE_ENV} "
                "(the stack's CliEnvironment output sets it)"
            )
        if not queue_arn:
            queue_arn = _queue_arn(stack)
    client = stack.boto_client("scheduler")
    return EventBridgeScheduler(
        client, group=group, target_arn=queue_arn or "", role_arn=role_arn or ""
    )


def _queue_arn(stack: Stack) -> str:
    attributes = stack.boto_client("sqs").get_queue_attributes(
        QueueUrl=stack.need_queue(), AttributeNames=["QueueArn"]
    )
    return str(attributes["Attributes"]["QueueArn"])


def _app(args: argparse.Namespace, stack: Stack, *, configure: bool) -> Continuum:
    app = load_app(app_target(args.app, f"schedules {args.action}"))
    if configure:
        stack.configure(app)
    return app


def _declared(app: Continuum, name: str) -> ScheduleDeclaration:
    declaration = app.registry.schedules.get(name)
    if declaration is None:
        known = ", ".join(sorted(app.registry.schedules)) or "none"
        raise CliError(f"the app declares no schedule {name!r} (it declares: {known})")
    return declaration


def cmd_sync(args: argparse.Namespace) -> int:
    """``continuum schedules sync``: what was created, updated, deleted and kept."""
    from continuum._ops.schedule_sync import sync_schedules

    stack = Stack.from_args(args)
    app = _app(args, stack, configure=False)
    report = sync_schedules(app, _scheduler(args, stack))
    for verb, names in (
        ("created", report.created),
        ("updated", report.updated),
        ("deleted", report.deleted),
        ("unchanged", report.unchanged),
    ):
        for name in names:
            paused = " (paused: stays paused until resumed)" if name in report.paused else ""
            print(f"{verb} {name}{paused}")
    if not report.changed:
        print("the schedules are what the app declares: nothing changed")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``continuum schedules list``: a table, one schedule a line."""
    from continuum._ops.schedule_sync import schedule_rows

    stack = Stack.from_args(args)
    app = _app(args, stack, configure=bool(stack.bucket))
    records = app.records if stack.bucket else None
    rows = schedule_rows(app, _scheduler(args, stack), records)
    if not rows:
        print("no schedules: the app declares none (app.schedule) and the group holds none")
        return 0
    table = [("NAME", "EXPRESSION", "TIMEZONE", "STATE", "NEXT FIRE", "LAST RUN", "LAST SKIP")]
    for row in rows:
        skip = f"{row.last_skip}, {row.skips} in all" if row.last_skip else "-"
        table.append(
            (
                row.name,
                row.expression,
                row.timezone,
                row.state,
                _when(row.next_fire),
                row.last_run or ("-" if records else "? (pass --bucket)"),
                skip,
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    return _set_state(args, pause=True)


def cmd_resume(args: argparse.Namespace) -> int:
    return _set_state(args, pause=False)


def _set_state(args: argparse.Namespace, *, pause: bool) -> int:
    from continuum._define.recurring import SCHEDULE_PREFIX
    from continuum.backends.scheduler import ScheduleNotFound

    scheduler = _scheduler(args, Stack.from_args(args))
    try:
        (scheduler.pause if pause else scheduler.resume)(SCHEDULE_PREFIX + args.name)
    except ScheduleNotFound:
        raise CliError(
            f"no schedule {args.name!r} in the group {scheduler.group!r}: is it declared, and "
            "synced (continuum schedules sync)?"
        ) from None
    print(f"{'paused' if pause else 'resumed'} {args.name}")
    return 0


def cmd_trigger(args: argparse.Namespace) -> int:
    """``continuum schedules trigger NAME``: start a run now, or say why it did not."""
    from continuum._base.clock import utcnow
    from continuum._worker.schedule_fires import ScheduleFires

    stack = Stack.from_args(args)
    stack.need_bucket()
    stack.need_queue()
    app = _app(args, stack, configure=True)
    declaration = _declared(app, args.name)
    fires = ScheduleFires(app.registry, app.records, app.continuations, app.settings)
    result = fires.fire(declaration, utcnow().replace(microsecond=0))
    if result.kind == "skipped":
        print(
            f"skipped: the previous run {result.running} has not finished (overlap='skip'); "
            "nothing started"
        )
    elif result.kind == "duplicate":
        print(f"{result.task_id} was started already (a fire at this second): nothing new")
    else:
        print(f"started {result.task_id}")
    return 0


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M}Z"
