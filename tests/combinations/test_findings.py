"""Failures the combination suite found outside the known cases, each reduced to the smallest
task that shows it (marked xfail until fixed; a fix removes the mark)."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
from freezegun import freeze_time

from continuum import Status
from continuum.testing import TaskRunner
from tests.combinations.shapes import INPUT, TASK_ID, build


def test_a_cancelled_async_agent_task_leaves_no_coroutine_unawaited(monkeypatch):
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(repr(u.object)))
    combo = build("async", "agent", inbox_poll_s=0)
    combo.probe.cancel_in = "issue_refund"  # seen at the agent's next model request
    with TaskRunner(combo.app, timeout_s=10) as runner:
        task = runner.run("job", INPUT, task_id=TASK_ID)
        task.callback("approve.issue_refund").choose("approve")  # the tool runs: the cancel
        assert task.status == Status.CANCELLED
    del task, runner
    gc.collect()
    # pytest's own hook makes it an error, under "filterwarnings = error", in any later test.
    assert unraisable == []


@pytest.mark.xfail(
    strict=True,
    reason="the in-memory queue keeps a message sent under a user's freeze_time at a future "
    "date invisible until that real date (moto's and SQS's are visible at once)",
)
def test_a_task_started_under_a_users_freeze_time_at_a_later_date_runs_once_unfrozen():
    combo = build("sync", "plain", pause_s=0.1)
    with TaskRunner(combo.app, virtual_time=False, timeout_s=3) as runner:
        with freeze_time("2030-01-15 09:00:00"):
            task = runner.start("job", INPUT, task_id=TASK_ID)
        assert task.run().status == Status.SUCCEEDED


USERS_TEST = """
from freezegun import freeze_time
from pydantic import BaseModel
from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner

app = Continuum()

class Job(BaseModel):
    n: int

@app.task(state=Job)
def job(ctx: TaskContext[Job]) -> int:
    return ctx.state.n

with TaskRunner(app, virtual_time=False) as runner, freeze_time("2026-12-01 09:00:00"):
    task_id = runner.client.start("job", {"n": 1})
    print(runner.client.status(task_id).status.value)
"""


@pytest.mark.slow
def test_a_users_freeze_time_around_client_calls_in_a_fresh_process():
    done = subprocess.run(
        [sys.executable, "-c", USERS_TEST], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "pending"), done.stderr[-2000:]
