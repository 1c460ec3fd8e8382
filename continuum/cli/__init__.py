"""The continuum command: start a project, run it locally, and operate its tasks.

Each command group is a module of this package with a ``register(commands)`` function that
adds its subcommands to the ``continuum`` parser; :data:`GROUPS` lists them in the order
``continuum --help`` shows them. To add a group (``waits``: signal, cancel, callback), write
``continuum/cli/waits.py`` with ``register`` and add it to :data:`GROUPS`. Its commands use
``continuum.cli.common``: ``add_stack_options`` and ``Stack.from_args(args).client()`` for a
client that needs no app, ``CliError`` for a one-line error. Beside the groups, ``answers``
answers a local run's waits and ``run_output`` is what ``run`` prints.

A command module imports what only it needs inside its functions, so ``continuum --help`` and
the commands that talk to AWS work from a plain ``pip install continuum-lambda``; the local
runtime (``run``, ``dev``) says to install ``continuum-lambda[local]`` when moto is missing.

May import: errors, _base, backends, _record, _define, _waits, _turn, _worker, _ops, _app, _local,
timeline, scaffold.
"""

from __future__ import annotations

import os
import signal
import sys
from types import ModuleType

from continuum.cli import (
    common,
    dev,
    project,
    run,
    schedule_commands,
    steer,
    tasks,
    ui,
    waits,
    worker,
)
from continuum.cli.common import CliError, Parser, explain
from continuum.errors import ContinuumError

#: The command groups, in the order the help lists them: the registration point.
GROUPS: tuple[ModuleType, ...] = (
    project,
    run,
    dev,
    tasks,
    waits,
    steer,
    ui,
    schedule_commands,
    worker,
)

__all__ = ["GROUPS", "build_parser", "common", "main"]


def build_parser() -> Parser:
    """The ``continuum`` parser with every group's commands."""
    parser = Parser(
        prog="continuum",
        description="Long-running tasks on AWS Lambda: start a project (init), run it "
        "locally (run, dev), operate its tasks (start, status, resume, signal, cancel, "
        "callback), see and steer them (list, inspect, cost, retry, fork, ui), keep its recurring "
        "schedules (schedules), or run its worker outside Lambda (worker).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``continuum`` command; return its exit code (errors are one line on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, so that a reader gone early is seen by the handler below
    except BrokenPipeError:
        return _reader_gone()
    except (CliError, ContinuumError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from continuum.cli.common import Stack

        stack = Stack.from_args(args) if hasattr(args, "bucket") else None
        text = explain(exc, stack)
        if text is None:
            raise
        return _fail(text)
    return code


def _reader_gone() -> int:
    """The reader of stdout left (``| head``): end quietly, as a tool that SIGPIPE ended."""
    # What is still buffered would fail again when the interpreter flushes it at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _fail(text: str) -> int:
    print(f"error: {text}", file=sys.stderr)
    return 2
