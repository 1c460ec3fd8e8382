"""continuum dev: the local twin of the deployed stack, with workers that reload on changes.

It starts a moto server with the stack's bucket and queues (``continuum._local.dev_stack``), prints
the ``export`` line that points ``continuum start / status / resume`` (and boto3) at it, with
the stack's signing key and its callback links' URL (so that a start from another terminal is
signed as the workers expect, and its status shows the links), and
runs ``continuum worker`` on its queues as a child process: the emulated Lambda. When a Python
file of the app changes, the worker is stopped as ECS would stop it (SIGTERM: running tasks
suspend at their next step) and started again on the new code, which continues them. Ctrl-C
stops the worker the same way, then the server; tasks live as long as the server does.
Its timeline pages (``continuum.timeline.server``: the task list, each task's timeline, and
forms that complete callbacks, send signals and cancel) are on ``--port``, the address a person
opens; the stack's endpoint (moto, for boto3 and the other commands) is on ``--stack-port``.
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

from continuum._base.signing_keys import SIGNING_KEY_ENV
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
#: A worker process killed this soon after its start is not started again by itself (a loop of
#: kills, such as the OOM killer at each start, waits for a change to the app instead).
RESTART_AGAIN_AFTER_S = 10.0
#: The timeline pages' default port (the stack's endpoint takes the next one).
UI_PORT = 5050
#: Ports that browsers refuse to open (Chromium's restricted ports, which Firefox's list
#: matches): a page there shows ERR_UNSAFE_PORT, so the pages must not listen on one.
BROWSER_UNSAFE_PORTS = frozenset(
    {1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101,
     102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389,
     427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636,
     989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566,
     6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080}
)  # fmt: skip


def register(commands: Any) -> None:
    """Add dev to the ``continuum`` command."""
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
        default=UI_PORT,
        metavar="PORT",
        help="the port of the timeline pages on 127.0.0.1, the address to open in a browser "
        "(tasks, their timelines, callbacks, signals, cancel); 0 picks a free one "
        "(default: %(default)s)",
    )
    dev.add_argument(
        "--stack-port",
        type=int,
        default=None,
        metavar="PORT",
        help="the port of the local stack's endpoint (moto: S3 and SQS) on 127.0.0.1, which "
        "the export line gives (default: --port + 1; 0 with --port 0)",
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
    dev.add_argument("--no-ui", action="store_true", help="do not serve the timeline pages")
    dev.add_argument("--no-reload", action="store_true", help="do not watch the app's files")
    dev.add_argument("--verbose", action="store_true", help="show the workers' JSON logs")
    dev.set_defaults(func=cmd_dev)


def cmd_dev(args: argparse.Namespace) -> int:
    """``continuum dev MODULE:APP``: serve until Ctrl-C; 0 when stopped cleanly."""
    from continuum._local.shutdown import Shutdown, stop_on_signals
    from continuum._local.source_watch import SourceWatcher, source_roots

    need_local_runtime()
    from continuum._local.dev_stack import DevStack

    target = app_target(args.app, "dev")
    ui_port, stack_port = dev_ports(args.port, args.stack_port, ui=not args.no_ui)
    roots = [] if args.no_reload else source_roots(target)
    with DevStack(port=stack_port, budget_s=args.budget) as stack, _pages(stack, ui_port) as pages:
        exports = {**stack.environment(), **_links_environment(pages), "CONTINUUM_APP": target}
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


def dev_ports(port: int, stack_port: int | None, *, ui: bool = True) -> tuple[int | None, int]:
    """Where the timeline pages (None: not served) and the stack's endpoint listen: the pages
    on ``port``, the stack on ``stack_port`` (by default the next port; 0 with ``port`` 0).

    Raises:
        CliError: a port out of range, one that browsers refuse, or both on one port.
    """
    if not 0 <= port <= 65535:
        raise CliError(f"--port must be 0 to 65535, got {port}")
    if ui and port in BROWSER_UNSAFE_PORTS:
        raise CliError(
            f"--port {port} is a port browsers refuse to open (ERR_UNSAFE_PORT): the timeline "
            f"pages would not show; pass another, such as {UI_PORT}"
        )
    if stack_port is None:
        stack_port = 0 if port == 0 else port + 1
        if stack_port > 65535:
            raise CliError(f"--port {port} leaves no next port for the stack: pass --stack-port")
    if not 0 <= stack_port <= 65535:
        raise CliError(f"--stack-port must be 0 to 65535, got {stack_port}")
    if ui and stack_port == port != 0:
        raise CliError(f"--port and --stack-port are both {port}: each needs its own port")
    return (port if ui else None), stack_port


@contextlib.contextmanager
def _pages(stack: Any, port: int | None) -> Iterator[Any]:
    """The timeline pages of the stack's tasks, on 127.0.0.1:port, while the block runs."""
    if port is None:
        yield None
        return
    from continuum._ops.links import LinkEndpoint
    from continuum.timeline.server import TimelineServer

    client = stack.task_client(os.environ.get("CONTINUUM_PREFIX"))
    links = LinkEndpoint(client.records, client.continuations, client.settings.signing_keys)
    with TimelineServer(client, port=port, links=links) as pages:
        yield pages


def _links_environment(pages: Any) -> dict[str, str]:
    """What gives callbacks links to these pages (the stack signs them): with the pages; else
    nothing, and callbacks are answered by id."""
    if pages is None:
        return {}
    from continuum._base.callback_links import CALLBACK_URL_ENV

    return {CALLBACK_URL_ENV: pages.url.rstrip("/")}


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
    given = os.environ.get(SIGNING_KEY_ENV, "").strip()
    yours = bool(given) and given == stack.signing_key
    # The user's own key may be a real one: never into scrollback or logs (a throwaway may).
    shown = {k: v for k, v in exports.items() if not (yours and k == SIGNING_KEY_ENV)}
    line = " ".join(f"{name}={shlex.quote(value)}" for name, value in shown.items())
    lines = [
        f"continuum dev: {target} on a local stack at {stack.endpoint} (moto)",
        f"  workers: {args.concurrency} at a time, {args.budget:g}s per invocation; {watching}",
    ]
    if pages is not None:
        lines.append(f"  timeline: {pages.url}  (tasks and their timelines; callbacks, signals)")
        lines.append(f"  callback links: {pages.url}cb/...  (cb.url, for a person or a webhook)")
    if yours:
        lines.append(
            f"  signing key: yours, from {SIGNING_KEY_ENV} (not printed): set the same "
            f"{SIGNING_KEY_ENV} in the other terminal too, from where you keep it (a start "
            "must be signed with it)"
        )
    else:
        lines.append(
            "  signing key: made for this session, in the export line (a start must be "
            "signed with it)"
        )
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
        self.started_at = 0.0

    def start(self) -> None:
        # The command is this interpreter running continuum's own CLI, built above.
        self.process = subprocess.Popen(self.command, env=self.env, start_new_session=True)  # noqa: S603
        self.reported = False
        self.started_at = time.monotonic()

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
        """Say once why the worker process ended by itself. Killed by a signal (kill -9, the
        OOM killer), it is started again, as Lambda would run the next invocation, unless it
        was killed again soon after a start; exited (the app failed to import, say), it
        waits for a change to the app's files."""
        process = self.process
        if process is None or self.reported or process.poll() is None:
            return
        self.reported = True
        code = process.returncode
        if code >= 0:
            print(
                f"continuum dev: the worker process exited with code {code} (its output above "
                "says why); it starts again when a .py file changes",
                flush=True,
            )
            return
        try:
            killed = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            killed = f"killed by signal {-code}"
        if time.monotonic() - self.started_at < RESTART_AGAIN_AFTER_S:
            print(
                f"continuum dev: the worker process was {killed} again within "
                f"{RESTART_AGAIN_AFTER_S:g} s of its start; it starts again when a .py file "
                "changes",
                flush=True,
            )
            return
        print(
            f"continuum dev: the worker process was {killed}; starting it again (the records "
            "fence what it was running: its tasks continue)",
            flush=True,
        )
        self.start()
