"""A task that failed says where: the traceback of the raise, kept in the record and shown by
status, inspect (text and page) and the worker's log, not only ``step raised ValueError``."""

from __future__ import annotations

import json

import pytest

from tests.outside.failing_app import app
from tests.outside.processes import Command, base_env, cli, dev_stack, wait_until

APP = "tests.outside.failing_app:app"


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_a_failed_task_shows_where_it_raised_in_status_inspect_and_the_worker_log():
    with dev_stack() as (stack, env):
        env = {**env, "CONTINUUM_APP": APP}
        app.configure(
            bucket="continuum-dev",
            queue_url=stack.queue_url,
            s3_client=stack.client("s3"),
            sqs_client=stack.client("sqs"),
        )
        in_step, in_task = (cli("start", task, env=env) for task in ("titles", "broken"))
        assert in_step.returncode == 0, in_step.stderr
        assert in_task.returncode == 0, in_task.stderr
        step_id, task_id = in_step.stdout.strip(), in_task.stdout.strip()
        worker = Command("worker", APP, "--queue-url", stack.queue_url, "--poll-wait", "1", env=env)
        try:
            wait_until(
                lambda: all(app.client().status(t).status.finished for t in (step_id, task_id)),
                what="both failures",
            )
            worker.wait_for(r"task failed: step raised ValueError")
        finally:
            worker.stop()

        status = cli("status", step_id, env=env)
        assert status.returncode == 0, status.stderr
        error = json.loads(status.stdout)["error"]
        assert error["message"] == "step raised ValueError: no title on page 3"
        assert "in parse_title" in error["traceback"]
        assert error["traceback"].endswith("ValueError: no title on page 3")
        assert "continuum/_steps" not in error["traceback"]  # the user's frames, not ours
        assert "in parse_title" in app.client().status(step_id).error.traceback

        text = cli("inspect", step_id, env=env).stdout
        assert 'raise ValueError(f"no title on page {page}")' in text
        assert "in parse_title" in cli("inspect", step_id, "--html", "-", env=env).stdout
        assert "in parse_title" in worker.output()

        error = json.loads(cli("status", task_id, env=env).stdout)["error"]
        assert error["type"] == "KeyError"
        assert "in broken" in error["traceback"]


def test_a_record_written_before_tracebacks_were_kept_still_loads():
    from continuum._record.model import ErrorInfo

    old = ErrorInfo.model_validate({"type": "StepError", "message": "step raised X: y"})
    assert old.traceback is None


def test_continuum_run_of_a_task_that_failed_prints_where_it_raised():
    done = cli("run", "tests.outside.failing_app:titles", env=base_env())
    assert done.returncode == 1, done.stderr
    assert "error: step raised ValueError: no title on page 3" in done.stdout
    assert 'raise ValueError(f"no title on page {page}")' in done.stdout
