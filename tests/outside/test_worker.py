"""continuum worker: continuations outside Lambda, stopped by SIGTERM or killed by SIGKILL.

The stack is a moto server in this process; the worker is a process of its own, as on ECS.
Every step appends to a ledger file, so which steps really ran is seen from outside.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.outside.ledger_app import app, ledger_lines
from tests.outside.processes import Command, cli, dev_stack, wait_until

APP = "tests.outside.ledger_app:app"
STEPS = 12


def worker(stack, env, *flags: str) -> Command:
    return Command(
        "worker", APP, "--queue-url", stack.queue_url, "--poll-wait", "1", *flags, env=env
    )


@pytest.fixture
def stack():
    with dev_stack() as (stack, env):
        app.configure(
            bucket="continuum-dev",
            queue_url=stack.queue_url,
            s3_client=stack.client("s3"),
            sqs_client=stack.client("sqs"),
        )
        kept = app.settings.signing_keys
        app.update_settings(signing_keys=(stack.signing_key,))  # as the stack's workers verify
        try:
            yield stack, env
        finally:
            app.update_settings(signing_keys=kept)


def start(ledger: Path, task_id: str, step_s: float = 0.2) -> str:
    state = {"n": STEPS, "ledger": str(ledger), "step_s": step_s}
    return app.client().start("count", state, task_id=task_id)


def runs_per_step(ledger: Path, task_id: str) -> Counter[int]:
    return Counter(i for task, i, _pid in ledger_lines(ledger) if task == task_id)


def test_sigterm_suspends_the_running_tasks_within_the_grace_period_and_exits_0(stack, tmp_path):
    stack, env = stack
    ledger = tmp_path / "ledger"
    tasks = [start(ledger, f"term-{i}") for i in range(2)]
    # 3 s of grace leave 1 s to the tasks (EXIT_MARGIN_S is 2): a few 0.2 s steps fit in it,
    # not the nine left of each task.
    first = worker(stack, env, "--concurrency", "2", "--grace", "3", "--budget", "60")
    try:
        wait_until(lambda: all(len(runs_per_step(ledger, t)) >= 3 for t in tasks), what="steps")
        stopped = time.monotonic()
        first.send(signal.SIGTERM)
        assert first.wait(timeout=5) == 0, first.output()
        took = time.monotonic() - stopped
    finally:
        first.stop()
    assert took < 3, f"the worker took {took:.1f}s to stop"
    assert "stopped (SIGTERM); nothing left running" in first.output()
    for task_id in tasks:
        status = app.client().status(task_id)
        assert status.status.value == "suspended", status
        assert "left" in (status.suspend_reason or "")
    before = {t: runs_per_step(ledger, t) for t in tasks}
    assert all(0 < len(runs) < STEPS for runs in before.values())

    second = worker(stack, env, "--concurrency", "2", "--grace", "5")
    try:
        wait_until(lambda: all(app.client().status(t).status.finished for t in tasks), what="end")
        second.send(signal.SIGTERM)
        assert second.wait(timeout=7) == 0, second.output()
    finally:
        second.stop()
    for task_id in tasks:
        assert app.client().result(task_id) == list(range(STEPS))
        assert runs_per_step(ledger, task_id) == Counter(range(STEPS))  # none ran twice


def test_sigkill_loses_nothing_the_record_fences_the_dead_worker(stack, tmp_path):
    stack, env = stack
    ledger = tmp_path / "ledger"
    task_id = start(ledger, "killed")
    # A 2 s budget: the dead worker's lease ends, and its message comes back, within seconds.
    first = worker(stack, env, "--budget", "2")
    try:
        wait_until(lambda: len(runs_per_step(ledger, task_id)) >= 4, what="four steps")
        first.send(signal.SIGKILL)
        assert first.wait(timeout=5) == -signal.SIGKILL
    finally:
        first.stop()
    killed_pid = ledger_lines(ledger)[-1][2]
    assert not app.client().status(task_id).status.finished

    second = worker(stack, env, "--budget", "2")
    try:
        wait_until(lambda: app.client().status(task_id).status.finished, what="the end")
    finally:
        second.send(signal.SIGTERM)
        assert second.wait(timeout=7) == 0, second.output()
    assert app.client().result(task_id) == list(range(STEPS))
    runs = runs_per_step(ledger, task_id)
    assert set(runs) == set(range(STEPS))
    # At least once: only the step the killed worker was running may have run twice.
    assert sum(n - 1 for n in runs.values()) <= 1, runs
    assert {pid for *_, pid in ledger_lines(ledger)} - {killed_pid}  # the second worker ran


def test_worker_refuses_a_missing_queue_or_bucket_naming_what_creates_them(stack):
    stack, env = stack
    missing = stack.queue_url.replace("continuum-dev", "nope")
    done = cli("worker", APP, "--queue-url", missing, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: the continuations queue {missing!r} does not exist: deploy the stack "
        "(sam deploy --guided; its CliEnvironment output sets them) or run `continuum dev` "
        "locally and paste the export line it prints"
    ]
    done = cli("worker", APP, "--queue-url", stack.queue_url, "--bucket", "nope", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("error: the bucket 'nope' does not exist: deploy the stack")
