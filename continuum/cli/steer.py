"""continuum list, inspect, cost, retry and fork: see what tasks did, and steer them.

None of them needs the app: they read (and, for retry and fork, write) the records.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from continuum.cli.common import CliError, Stack, add_stack_options, terminal_safe

if TYPE_CHECKING:
    from continuum._ops.inspection import TaskView
    from continuum._ops.status import TaskSummary

#: The most characters of the state ``inspect`` prints (``--json`` prints all of it).
STATE_CHARS = 2000


def register(commands: Any) -> None:
    """Add list, inspect, cost, retry and fork to the ``continuum`` command."""
    listing = commands.add_parser("list", help="list tasks, newest first (needs no app)")
    listing.add_argument(
        "--status", type=status_name, default=None, help="only tasks in this status"
    )
    listing.add_argument("--task", default=None, help="only tasks of this task name")
    listing.add_argument(
        "--since", default=None, help="only tasks updated since: an ISO time, or 30m, 6h, 2d"
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    add_stack_options(listing, queue=False)
    listing.set_defaults(func=cmd_list)

    inspect = commands.add_parser(
        "inspect",
        help="show what a task did: invocations, steps, waits, its error and its state",
        description="Show a task's invocations (start, duration, turns, steps run and "
        "replayed, why each ended), each step with its duration and attempts, its waits, its "
        "error, its cost and its state, from its record and the record's earlier versions.",
    )
    inspect.add_argument("task_id", metavar="TASK_ID")
    inspect.add_argument("--json", action="store_true", help="the whole view as JSON")
    inspect.add_argument(
        "--html",
        default=None,
        metavar="FILE",
        help="write the timeline as one self-contained HTML page (- for stdout)",
    )
    inspect.add_argument("--versions", type=versions, default=200, help="earlier versions to read")
    add_stack_options(inspect, queue=False)
    inspect.set_defaults(func=cmd_inspect)

    cost = commands.add_parser("cost", help="what a task cost, in requests and dollars")
    cost.add_argument("task_id", metavar="TASK_ID")
    add_stack_options(cost, queue=False)
    cost.set_defaults(func=cmd_cost)

    retry = commands.add_parser(
        "retry",
        help="run a failed task's failed turn again, after a fix is deployed",
        description="Run a failed task again from its last good checkpoint: the steps it "
        "recorded are kept, the failed turn runs again.",
    )
    retry.add_argument("task_id", metavar="TASK_ID")
    add_stack_options(retry)
    retry.set_defaults(func=cmd_retry)

    fork = commands.add_parser(
        "fork",
        help="start a new task from any past checkpoint of a task",
        description="Start task NEW_ID from a stored version of TASK_ID's record (bucket "
        "versioning): continuum inspect TASK_ID --json lists them (checkpoints[].version_id); "
        "'latest' takes the current one.",
    )
    fork.add_argument("task_id", metavar="TASK_ID")
    fork.add_argument("--at", required=True, metavar="VERSION", help="a version id, or latest")
    fork.add_argument("--as", dest="new_id", required=True, metavar="NEW_ID")
    add_stack_options(fork)
    fork.set_defaults(func=cmd_fork)


def status_name(text: str) -> str:
    """An argparse type: one of the statuses a task can be in."""
    from continuum._record.model import Status

    names = [status.value for status in Status]
    if text not in names:
        raise argparse.ArgumentTypeError(f"{text!r} is not a status; use one of {', '.join(names)}")
    return text


def versions(text: str) -> int:
    """An argparse type: how many earlier versions to read, zero or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or a positive whole number, got {text!r}")
    return value


def cmd_list(args: argparse.Namespace) -> int:
    since = _since(args.since) if args.since else None
    tasks = (
        Stack.from_args(args).client().tasks(status=args.status, task_name=args.task, since=since)
    )
    if args.json:
        for task in tasks:
            print(task.model_dump_json())
        return 0
    print(terminal_safe("\n".join(list_lines(tasks))))
    return 0


def list_lines(tasks: list[TaskSummary]) -> list[str]:
    """``continuum list`` as text: a header and a line per task, each column as wide as its
    widest value (a child's id is its parent's and more)."""
    ids = max([len("TASK ID"), 34, *(len(t.task_id) for t in tasks)])
    names = max([len("TASK"), 16, *(len(t.task_name) for t in tasks)])
    lines = [f"{'TASK ID':{ids}} {'TASK':{names}} {'STATUS':10} {'TURN':>5} {'INV':>5}  UPDATED"]
    for t in tasks:
        lines.append(
            f"{t.task_id:{ids}} {t.task_name:{names}} {t.status.value:10} {t.turn:>5} "
            f"{t.invocations:>5}  {t.updated_at:%Y-%m-%d %H:%M:%S}"
        )
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    from continuum._ops.inspection import inspect_task

    client = Stack.from_args(args).client()
    view = inspect_task(
        client.records, args.task_id, versions=args.versions, links=client.settings.links()
    )
    if args.html:
        return _write_timeline(view, args.html)
    if args.json:
        print(view.model_dump_json(indent=1))
        return 0
    print(terminal_safe(render(view)))
    return 0


def _write_timeline(view: TaskView, target: str) -> int:
    from continuum.timeline import timeline_page

    page = timeline_page(view)
    if target == "-":
        sys.stdout.write(page)
        return 0
    path = Path(target)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--html: cannot write {target}: {exc.strerror}") from None
    print(
        f"wrote {path}: the timeline of {view.task_id} ({len(view.invocations)} invocations, "
        f"{len(view.checkpoints)} checkpoints); open it in a browser"
    )
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from continuum._ops.inspection import inspect_task

    view = inspect_task(Stack.from_args(args).client().records, args.task_id, versions=0)
    print(cost_text(view))
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    stack = Stack.from_args(args)
    stack.need_queue()
    generation = stack.client().retry(args.task_id)
    print(f"retrying {args.task_id}: generation {generation} continues its failed turn")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    stack = Stack.from_args(args)
    stack.need_queue()
    new_id = stack.client().fork(args.task_id, version=args.at, new_id=args.new_id)
    print(f"started {new_id} from {args.task_id} at {args.at}")
    return 0


def _since(text: str) -> datetime:
    units = {"m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].isdigit():
        return datetime.now(UTC) - timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--since wants an ISO time or 30m, 6h, 2d; got {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def render(view: TaskView) -> str:
    """``continuum inspect`` as text."""
    lines = [*_head_lines(view), "", *_invocation_lines(view), *_children_lines(view)]
    lines.extend(_agent_lines(view))
    lines.append("")
    lines.append(f"checkpoints: {len(view.checkpoints)} stored versions of the record")
    lines.append(cost_text(view))
    state = json.dumps(view.state, indent=1)
    if len(state) > STATE_CHARS:
        state = state[:STATE_CHARS] + f"\n... ({len(state)} characters; --json shows all)"
    lines.append("")
    # The record keeps the snapshot its current turn replays from, not the turn's changes.
    lines.append(f"state (the snapshot turn {view.turn} began with):")
    lines.append(state)
    return "\n".join(lines)


def _head_lines(view: TaskView) -> list[str]:
    """The task, its parent, its error and what it waits for."""
    lines = [
        f"task {view.task_id} ({view.task_name}): {view.status.value}, turn {view.turn}, "
        f"generation {view.generation}",
        f"  created {view.created_at:%Y-%m-%d %H:%M:%S}  "
        f"updated {view.updated_at:%Y-%m-%d %H:%M:%S}",
    ]
    if view.parent is not None:
        lines.append(
            f"  child of {view.parent.task_id} (item {view.parent.index} of batch "
            f"{view.parent.batch})"
        )
    if view.error is not None and view.status.value == "cancelled":
        lines.append(f"  cancelled in turn {view.error.turn}: {view.error.message}")
    elif view.error is not None:
        where = f" at step {view.error.step}" if view.error.step else ""
        lines.append(
            f"  error {view.error.type}{where} in turn {view.error.turn}: {view.error.message}"
        )
        if view.error.traceback:
            lines.extend(f"    {line}" for line in view.error.traceback.splitlines())
    if view.hint is not None:
        lines.append(f"  {view.hint}")
    for waiter in view.waiting_for:
        until = f" until {waiter.deadline:%Y-%m-%d %H:%M:%S}" if waiter.deadline else ""
        ident = f" (id {waiter.id})" if waiter.id else ""
        lines.append(f"  waits for {waiter.kind} {waiter.name!r}{until}{ident}")
        if waiter.url:
            lines.append(f"    link: {waiter.url}")
        lines.extend(_request_lines(waiter.id, waiter.request))
    return lines


def _invocation_lines(view: TaskView) -> list[str]:
    """Each invocation shown, with its steps."""
    lines = [f"invocations ({len(view.invocations)} shown):"]
    for run in view.invocations:
        took = f"{run.duration_s:.2f}s" if run.duration_s is not None else "?"
        hops = f", then {run.hops} timer hops" if run.hops else ""
        why = f": {run.reason}" if run.reason else ""
        lines.append(
            f"  #{run.number:<4} {run.started_at:%Y-%m-%d %H:%M:%S} {took:>8}  {run.message:8} "
            f"turn {run.turn}+{run.turns}  steps {run.steps_executed} run, "
            f"{run.steps_replayed} replayed  {run.outcome.value}{why}{hops}"
        )
        for step in run.steps:
            tries = f" x{step.attempts}" if step.attempts > 1 else ""
            lines.append(
                f"        turn {step.turn:<3} {step.key:32} {step.duration_s:8.3f}s{tries}  "
                f"{step.outcome}"
            )
        if run.steps_dropped:
            lines.append(f"        ... {run.steps_dropped} earlier steps (in older versions)")
    return lines


def _agent_lines(view: TaskView) -> list[str]:
    """An agent task's model requests, tool calls and approvals (none: no lines)."""
    if not view.agent:
        return []
    lines = ["", f"agent (turn {view.turn}): {len(view.agent)} events"]
    for event in view.agent:
        failed = f"  failed: {event.error}" if event.error else ""
        if event.kind == "model_request":
            asks = ", ".join(f"{c['tool']}({_short(c['args'])})" for c in event.tool_calls)
            said = f" says {_short(event.text)}" if event.text else ""
            wants = f" asks for {asks}" if asks else ""
            lines.append(f"  model {event.model or 'request'}:{said}{wants}{failed}")
        elif event.kind == "tool_call":
            lines.append(
                f"  tool {event.tool}({_short(event.args)}) -> {_short(event.result)}{failed}"
            )
        else:
            said = f": {_short(event.comment)}" if event.comment else ""
            lines.append(
                f"  approval of {event.tool}({_short(event.args)}): {event.decision}{said}"
            )
    return lines


def _short(value: Any, most: int = 160) -> str:
    """A value in one line of at most ``most`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 3] + "..."


def _children_lines(view: TaskView) -> list[str]:
    """The child tasks, each with its status and cost (none: no lines)."""
    if not view.children:
        return []
    from continuum._ops.prices import money

    lines = ["", f"children ({len(view.children)}):"]
    for child in view.children:
        status = child.status.value if child.status else "not started"
        cost = money(child.cost) if child.cost is not None else ""
        lines.append(f"  {child.index:>4}  {child.task_id}  {child.task_name}  {status}  {cost}")
    return lines


def _request_lines(callback_id: str | None, request: Any) -> list[str]:
    """What a callback asks, and the command that sends each of its ready answers."""
    from continuum._base.json_shapes import for_a_person, ready_answers

    if request is None:
        return []
    text = json.dumps(for_a_person(request))
    if len(text) > STATE_CHARS:
        text = text[:STATE_CHARS] + f" ... ({len(text)} characters; --json shows all)"
    lines = [f"    asks {text}"]
    for name, answer in ready_answers(request).items():
        lines.append(
            f"    {name}: continuum callback complete {callback_id} --answer {name}"
            f"  (sends {json.dumps(answer)})"
        )
    return lines


def cost_text(view: TaskView) -> str:
    """What ``view``'s task cost, by service, and what it used (``continuum cost``)."""
    from continuum._ops.prices import money

    u, c = view.usage, view.cost
    family = ""
    if view.children:
        ended = Counter(
            child.status.value if child.status else "not started" for child in view.children
        )
        spent = sum(child.cost or 0.0 for child in view.children)
        family = (
            f"\n  its {len(view.children)} child tasks "
            f"({', '.join(f'{n} {status}' for status, n in sorted(ended.items()))}) cost "
            f"{money(spent)} more: {money(c['total'] + spent)} with them"
        )
    if view.parent is not None:
        family = (
            f"\n  child of {view.parent.task_id} (item {view.parent.index}): "
            f"continuum cost {view.parent.task_id} adds it to its parent's"
        )
    return (
        f"cost: {money(c['total'])} (Lambda {money(c['lambda'])}, S3 {money(c['s3'])}, SQS "
        f"{money(c['sqs'])})\n"
        f"  {u.invocations} invocations, {u.lambda_ms} ms billed ({u.gb_ms / 1000:.3f} GB-s); "
        f"S3 {u.s3_get} GET, {u.s3_put} PUT, {u.s3_list} LIST, {u.s3_tag} tag, "
        f"{u.s3_delete} DELETE; SQS {u.sqs_send} send, {u.sqs_visibility} visibility, "
        f"{u.sqs_receives} received{family}"
    )
