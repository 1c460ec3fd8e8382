"""Locally, schedules fire: the runtime, ``continuum.testing`` and the dev stack fire every due
schedule (one-time or recurring) themselves, on their clocks; moto only stores them."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from continuum import Continuum
from continuum._app.backend_config import QUEUE_ARN_ENV, SCHEDULE_GROUP_ENV, SCHEDULER_ROLE_ENV
from continuum._local.dev_stack import SCHEDULE_GROUP, DevStack
from continuum.backends.eventbridge import EventBridgeScheduler
from continuum.testing import TaskRunner
from tests.scheduler_waits.test_long_waits import nap_app


def test_the_runtime_fires_recurring_schedules_too_on_its_virtual_clock(make_runtime):
    runtime = make_runtime(Continuum(), scheduler=True)
    with runtime.time.running():
        scheduler = runtime.app.scheduler()
        assert scheduler is not None
        scheduler.put_recurring(name="hourly", expression="rate(1 hour)", message_body="{}")
        started = time.time()

        def fire() -> int:
            fired = runtime.fire_schedules()
            for message in runtime.source.receive(max_messages=10):  # what the worker would get
                runtime.source.delete(message.receipt_handle)
            return fired

        fired = fire()  # a rate's first time is its creation
        for _ in range(3):
            due = runtime.next_due()
            assert due is not None
            runtime.time.wait_until(due, poll_s=0.0)  # the virtual clock jumps to the fire
            fired += fire()
        assert fired == 4
        assert 3 * 3600 - 2 < time.time() - started < 3 * 3600 + 2
        assert [s.name for s in scheduler.schedules()] == ["hourly"]


def test_a_thirty_day_sleep_in_a_task_runner_is_one_schedule(backend):
    app, ran = nap_app()
    with TaskRunner(app, backend=backend, max_delay_s=900) as runner:
        task = runner.run("nap", {"days": 30})
        assert task.result is not None
        assert task.counters.hops == 1
    assert [what for what, _ in ran] == ["before", "after"]


def test_the_dev_stack_names_its_schedule_group_and_fires_what_is_due():
    with DevStack(port=0, budget_s=10) as stack:
        env = stack.environment()
        assert env[SCHEDULE_GROUP_ENV] == SCHEDULE_GROUP
        assert env[QUEUE_ARN_ENV].endswith(":continuum-dev")
        scheduler = EventBridgeScheduler(
            stack.client("scheduler"),
            group=env[SCHEDULE_GROUP_ENV],
            target_arn=env[QUEUE_ARN_ENV],
            role_arn=env[SCHEDULER_ROLE_ENV],
        )
        at = datetime.now(UTC) - timedelta(seconds=1)
        scheduler.schedule_at(name="due-now", at=at, message_body=json.dumps({"hello": 1}))
        sqs = stack.client("sqs")
        got: list[dict[str, str]] = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:  # the stack's own thread fires it
            got = sqs.receive_message(QueueUrl=stack.queue_url, WaitTimeSeconds=1).get(
                "Messages", []
            )
        assert [json.loads(m["Body"]) for m in got] == [{"hello": 1}]
        # A one-time schedule deletes itself after its fire: the message may arrive first.
        while scheduler.get("due-now") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert scheduler.get("due-now") is None
