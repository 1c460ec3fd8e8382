"""continuum dev: the local twin of the deployed stack, with workers that reload on changes.

It starts a moto server with the stack's bucket and queues (``continuum.devstack``), prints
the ``export`` line that points ``continuum start / status / resume`` (and boto3) at it, and
runs ``continuum worker`` on its queues as a child process: the emulated Lambda. When a Python
file of the app changes, the worker is stopped as ECS would stop it (SIGTERM: running tasks
suspend at their next step) and started again on the new code, which continues them. Ctrl-C
stops the worker the same way, then the server; tasks live as long as the server does.
It also serves the timeline pages on the next port (``continuum.timeline.server``): the task
list, each task's timeline, and forms that complete callbacks, send signals and cancel.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from continuum.cli.common import (
    CliError,
    add_app_argument,
    app_target,
    budget_option,
    count,
    grace_seconds,
    need_local_runtime,
)

#: How often the dev server looks for changed files (and at its worker).
WATCH_EVERY_S = 0.3
#: Seconds the dev server waits beyond the worker's grace period before it kills it.
KILL_AFTER_S = 3.0


def register(commands: Any) -> None:
    """Add dev to the ``continuum`` command."""
    from continuum.devstack import DEV_PORT

    dev = commands.add_parser(
        "dev",
        help="a local stack (moto) and workers for your app, reloaded when its code changes",
        description="Start a moto server with the stack's bucket, continuation queue and "
        "dead-letter queue, print the export line that points the other continuum commands "
        "at it, and run workers on it with an emulated Lambda budget. They restart on the "
        "new code when a Python file of the app changes. Ctrl-C stops everything.",
    )
    add_app_argument(dev)
    dev.add_argument(
        "--port",
        type=int,
        default=DEV_PORT,
        metavar="PORT",
        help="the server's port on 127.0.0.1; 0 picks a free one (default: %(default)s)",
    )
    budget_option(
        dev, default=900.0, help="seconds per emulated invocation, as the stack's "
        "FunctionTimeout (default: %(default)g; try 5 to see continuations)",
    )  # fmt: skip
    dev.add_argument(
        "--concurrency",
        type=count,
        default=2,
        metavar="N",
        help="messages run at once (default: 2)",
    )
    dev.add_argument(
        "--grace",
        type=grace_seconds,
        default=25.0,
        metavar="SECONDS",
        help="seconds a reload or Ctrl-C gives running tasks to suspend (default: %(default)g)",
    )
    dev.add_argument(
        "--ui-port",
        type=int,
        default=None,
        metavar="PORT",
        help="the port of the timeline pages (tasks, their timelines, callbacks, signals, "
        "cancel) on 127.0.0.1 (default: the server's port + 1; 0 with --port 0)",
    )
    dev.add_argument("--no-ui", action="store_true", help="do not serve the timeline pages")
    dev.add_argument("--no-reload", action="store_true", help="do not watch the app's files")
    dev.add_argument("--verbose", action="store_true", help="show the workers' JSON logs")
    dev.set_defaults(func=cmd_dev)


def cmd_dev(args: argparse.Namespace) -> int:
    """``continuum dev MODULE:APP``: serve until Ctrl-C; 0 when stopped cleanly."""
    from continuum.reload import SourceWatcher, source_roots
    from continuum.shutdown import Shutdown, stop_on_signals

    need_local_runtime()
    from continuum.devstack import DevStack

    target = app_target(args.app, "dev")
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0 to 65535, got {args.port}")
    ui_port = _ui_port(args)
    roots = [] if args.no_reload else source_roots(target)
    with DevStack(port=args.port, budget_s=args.budget) as stack, _pages(stack, ui_port) as pages:
        exports = {**stack.environment(), "CONTINUUM_APP": target}
        _banner(args, target, stack, exports, roots, pages)
        worker = _WorkerProcess(_worker_command(args, target, stack), {**os.environ, **exports})
        shutdown = Shutdown()
        with stop_on_signals(shutdown, grace_s=args.grace, again=lambda _s: worker.kill()):
            worker.start()
            watcher = SourceWatcher(roots)
            while not shutdown.requested:
                time.sleep(WATCH_EVERY_S)
                if changed := watcher.changed():
                    shown = ", ".join(_relative(p) for p in changed[:3])
                    print(f"continuum dev: {shown} changed; reloading the workers", flush=True)
                    worker.stop(args.grace)
                    worker.start()
                worker.report_exit()
            print("continuum dev: stopping the workers (running tasks suspend)", flush=True)
            worker.stop(args.grace)
    print("continuum dev: stopped; its tasks are gone with it", flush=True)
    return 0


def _ui_port(args: argparse.Namespace) -> int | None:
    """Where the timeline pages listen (None: not served)."""
    if args.no_ui:
        return None
    if args.ui_port is None:
        return 0 if args.port == 0 else args.port + 1
    if not 0 <= args.ui_port <= 65535:
        raise CliError(f"--ui-port must be 0 to 65535, got {args.ui_port}")
    return int(args.ui_port)


@contextlib.contextmanager
def _pages(stack: Any, port: int | None) -> Iterator[Any]:
    """The timeline pages of the stack's tasks, on 127.0.0.1:port, while the block runs."""
    if port is None:
        yield None
        return
    from continuum.timeline.server import TimelineServer

    with TimelineServer(stack.task_client(os.environ.get("CONTINUUM_PREFIX")), port=port) as pages:
        yield pages


def _worker_command(args: argparse.Namespace, target: str, stack: Any) -> list[str]:
    command = [
        sys.executable, "-m", "continuum.cli", "worker", target,
        "--bucket", stack.environment()["CONTINUUM_BUCKET"],
        "--queue-url", stack.queue_url,
        "--dead-letter-queue-url", stack.dead_letter_queue_url,
        "--endpoint-url", stack.endpoint,
        "--budget", repr(args.budget),
        "--concurrency", str(args.concurrency),
        "--grace", repr(args.grace),
        "--poll-wait", "1",
        "--progress",
        "--exit-with-parent",
    ]  # fmt: skip
    if not args.verbose:
        command += ["--log-level", "WARNING"]
    return command


def _banner(
    args: argparse.Namespace,
    target: str,
    stack: Any,
    exports: dict[str, str],
    roots: list[Path],
    pages: Any,
) -> None:
    watching = (
        "reloading when a .py file under " + ", ".join(map(str, roots)) + " changes"
        if roots
        else "not reloading"
    )
    line = " ".join(f"{name}={shlex.quote(value)}" for name, value in exports.items())
    lines = [
        f"continuum dev: {target} on a local stack at {stack.endpoint} (moto)",
        f"  workers: {args.concurrency} at a time, {args.budget:g}s per invocation; {watching}",
    ]
    if pages is not None:
        lines.append(f"  timeline: {pages.url}  (tasks and their timelines; callbacks, signals)")
    lines += [
        "Point the other commands at it, in another terminal:",
        f"  export {line}",
        "  continuum start TASK --input '{...}'     # prints the task id",
        "  continuum status TASK_ID",
        "Tasks live as long as this server does. Ctrl-C stops it.",
    ]
    print("\n".join(lines), flush=True)


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class _WorkerProcess:
    """``continuum worker`` as a child process, in its own session (Ctrl-C reaches only us)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.reported = False

    def start(self) -> None:
        # The command is this interpreter running continuum's own CLI, built above.
        self.process = subprocess.Popen(self.command, env=self.env, start_new_session=True)  # noqa: S603
        self.reported = False

    def stop(self, grace_s: float) -> None:
        """SIGTERM: its tasks suspend within the grace period; killed if it takes longer."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace_s + KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Now (a second Ctrl-C): the records fence what it was running."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()

    def report_exit(self) -> None:
        """Say once that the worker exited by itself (say, the app failed to import)."""
        if self.process is None or self.reported or self.process.poll() is None:
            return
        self.reported = True
        print(
            f"continuum dev: the workers exited (code {self.process.returncode}); fix the app, "
            "and they restart when a file changes",
            flush=True,
        )
