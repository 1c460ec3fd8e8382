"""The ``continuum`` command: run a task locally on moto, start one, or read its status."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from continuum.app import Continuum
from continuum.errors import ContinuumError
from continuum.tasks import Task


def _load(target: str, kind: type[Any], what: str) -> Any:
    from continuum.loading import load_target

    return load_target(target, kind, what=what)


def _parse_input(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: --input is not valid JSON: {exc}") from exc


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from continuum.local import Invocation, LocalRuntime, moto_backend

    task = _load(args.target, Task, "MODULE:TASK")
    console = Console(highlight=False, soft_wrap=True)
    payload = _parse_input(args.input)

    def show(inv: Invocation) -> None:
        why = f"suspended: {inv.reason}" if inv.reason else inv.status
        flag = " [red]OVERRAN[/]" if inv.overran else ""
        console.print(
            f"[bold]invocation {inv.number:>3}[/]  turn {inv.turn:>3}  "
            f"steps {inv.steps_executed:>3} run, {inv.steps_replayed:>2} replayed  "
            f"{inv.seconds:5.2f}s  {why}{flag}"
        )

    if not args.verbose:
        _quiet_logs()
    app = _owner_app(task)
    with moto_backend():
        runtime = LocalRuntime(app, budget_s=args.budget)
        console.print(f"running [bold]{task.name}[/] on moto, {args.budget:g}s per invocation")
        try:
            summary = runtime.run(task.name, payload, task_id=args.task_id, on_invocation=show)
        except ContinuumError as exc:
            console.print(f"[red]error:[/] {exc}")
            return 2
    colour = "green" if summary.status == "succeeded" else "red"
    console.print(f"\n[{colour}]{summary.status}[/] task {summary.task_id}")
    if summary.result is not None:
        shown = summary.result if isinstance(summary.result, str) else json.dumps(summary.result)
        console.print(shown, markup=False)
    if summary.error:
        console.print(f"error: {summary.error}", markup=False)
    console.print(
        f"\ninvocations {summary.invocations}  continuations {summary.continuations}  "
        f"turns {summary.turns}  steps executed {summary.steps}  "
        f"steps replayed {summary.steps_replayed}  overruns {summary.overruns}\n"
        f"S3 calls {summary.s3_calls}  SQS calls {summary.sqs_calls}  "
        f"({', '.join(f'{k} {v}' for k, v in summary.aws_calls.items())})  "
        f"{summary.seconds:.1f}s"
    )
    if args.json:
        print(summary.to_json(), flush=True)
    return 0 if summary.status == "succeeded" else 1


def _owner_app(task: Task[Any]) -> Continuum:
    """The app that registered ``task`` (found in the task's module)."""
    module = sys.modules.get(task.fn.__module__)
    for value in vars(module).values() if module else ():
        if isinstance(value, Continuum) and value.tasks.get(task.name) is task:
            return value
    raise SystemExit(f"error: no Continuum app in {task.fn.__module__!r} registers {task.name!r}")


def _app_from_args(args: argparse.Namespace) -> Continuum:
    import boto3

    target = args.app or os.environ.get("CONTINUUM_APP")
    if not target:
        raise SystemExit("error: name the app with --app MODULE:APP or CONTINUUM_APP")
    app: Continuum = _load(target, Continuum, "--app")
    endpoint = args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
    app.configure(
        bucket=args.bucket,
        queue_url=args.queue_url,
        s3_client=boto3.client("s3", endpoint_url=endpoint),
        sqs_client=boto3.client("sqs", endpoint_url=endpoint),
    )
    return app


def cmd_start(args: argparse.Namespace) -> int:
    app = _app_from_args(args)
    task_id = app.client().start(args.task, _parse_input(args.input), task_id=args.task_id)
    print(task_id)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    app = _app_from_args(args)
    print(app.client().status(args.task_id).model_dump_json(indent=2))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    app = _app_from_args(args)
    generation = app.client().resume(args.task_id)
    print(f"sent the continuation of generation {generation} of {args.task_id}")
    return 0


def _quiet_logs() -> None:
    from continuum import batch

    # The worker logs JSON lines for CloudWatch; a terminal run shows its own progress.
    batch.logger.setLevel("ERROR")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="continuum", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a task end to end locally on moto")
    run.add_argument("target", metavar="MODULE:TASK")
    run.add_argument("--input", default="{}", help="the task's input state as JSON")
    run.add_argument("--budget", type=float, default=5.0, help="seconds per invocation")
    run.add_argument("--task-id", default=None)
    run.add_argument("--json", action="store_true", help="end with a JSON summary line")
    run.add_argument("--verbose", action="store_true", help="show the worker's JSON logs")
    run.set_defaults(func=cmd_run)

    for name, func, helptext in (
        ("start", cmd_start, "start a task on a deployed stack (or a moto server)"),
        ("status", cmd_status, "show a task's status"),
        ("resume", cmd_resume, "send a task's current continuation again (always safe)"),
    ):
        p = sub.add_parser(name, help=helptext)
        if name == "start":
            p.add_argument("task", metavar="TASK")
            p.add_argument("--input", default="{}")
            p.add_argument("--task-id", default=None)
        else:
            p.add_argument("task_id", metavar="TASK_ID")
        p.add_argument("--app", default=None, help="MODULE:APP (default: $CONTINUUM_APP)")
        p.add_argument("--bucket", default=None, help="default: $CONTINUUM_BUCKET")
        p.add_argument("--queue-url", default=None, help="default: $CONTINUUM_QUEUE_URL")
        p.add_argument("--endpoint-url", default=None, help="default: $AWS_ENDPOINT_URL")
        p.set_defaults(func=func)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except ContinuumError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    raise SystemExit(main())
