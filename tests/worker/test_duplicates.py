"""Duplicate, stale and reordered continuations change nothing; a task id starts once.

Every test runs in both flavours (``tests/flavours.py``): ``tally`` and its async twin, whose
turns gather two steps (``tests/tally.py``).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from continuum import Status
from tests.conftest import (
    ScriptedContext,
    after_store_call,
    atomic_writes,
    continuation,
    drain,
    record_key,
    sends_lost,
    snapshot_objects,
    sqs_event,
)
from tests.flavours import FLAVOURS
from tests.support import Lease, LocalRuntime, utcnow
from tests.tally import TOTAL_STEPS, build

pytestmark = pytest.mark.parametrize("flavour", FLAVOURS)


@pytest.fixture
def setup(aws, flavour):
    app, calls = build(flavour)
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    return app, calls, runtime


def unlimited(calls):
    return lambda i: ScriptedContext(None, executed=lambda: sum(calls.values()))


def test_same_message_delivered_concurrently_runs_each_step_once(setup):
    app, calls, runtime = setup
    task_id = app.client().start("tally", {"label": "c"}, task_id="dup-1")
    event = sqs_event(continuation(task_id, 0), message_ids=["same-message"])

    # Both workers read the record before either claims it.
    both_loaded = threading.Barrier(2, timeout=10)
    gets = []

    def first_reads_meet(_key):
        gets.append(1)
        if len(gets) <= 2:  # each worker's first read; the loser reads again after its 412
            both_loaded.wait()

    results = []

    def deliver():
        context = ScriptedContext(None, executed=lambda: sum(calls.values()))
        results.append(app.handler(event, context))

    with atomic_writes(runtime), after_store_call(runtime, "get", first_reads_meet):
        threads = [threading.Thread(target=deliver) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)

    assert results == [{"batchItemFailures": []}] * 2
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED
    assert sum(calls.values()) == TOTAL_STEPS
    assert all(n == 1 for n in calls.values())
    assert record.counters.invocations == 1  # the loser's claim was refused (412)


def test_same_message_delivered_twice_in_a_row_runs_each_step_once(setup):
    app, calls, runtime = setup
    task_id = app.client().start("tally", {"label": "s"}, task_id="dup-2")
    body = continuation(task_id, 0)

    # The first delivery runs 5 steps and suspends; the duplicate arrives after it.
    first = ScriptedContext(5, executed=lambda: sum(calls.values()))
    assert app.handler(sqs_event(body, message_ids=["m-1"]), first) == {"batchItemFailures": []}
    assert runtime.record(task_id).status == Status.SUSPENDED
    before = snapshot_objects(runtime)
    again = ScriptedContext(None, executed=lambda: sum(calls.values()))
    assert app.handler(sqs_event(body, message_ids=["m-2"]), again) == {"batchItemFailures": []}
    assert snapshot_objects(runtime) == before  # stale: nothing written

    record = drain(runtime, task_id, unlimited(calls))
    assert record.status == Status.SUCCEEDED
    assert sum(calls.values()) == TOTAL_STEPS
    assert all(n == 1 for n in calls.values())

    # And once more after the task finished: acknowledged, nothing written.
    done = snapshot_objects(runtime)
    assert app.handler(sqs_event(body, message_ids=["m-3"]), again) == {"batchItemFailures": []}
    assert snapshot_objects(runtime) == done
    assert sum(calls.values()) == TOTAL_STEPS


def test_stale_generation_is_acknowledged_and_changes_nothing(setup):
    app, calls, runtime = setup
    task_id = app.client().start("tally", {"label": "g"}, task_id="stale-1")
    # Three suspensions: the record reaches generation 3.
    for allowed in (2, 2, 2):
        runtime.invoke_once(ScriptedContext(allowed, executed=lambda: sum(calls.values())))
    record = runtime.record(task_id)
    assert (record.status, record.generation) == (Status.SUSPENDED, 3)
    before = snapshot_objects(runtime)

    for generation in (0, 2, 1):  # old and out of order
        context = ScriptedContext(None, executed=lambda: sum(calls.values()))
        result = app.handler(sqs_event(continuation(task_id, generation)), context)
        assert result == {"batchItemFailures": []}
    assert snapshot_objects(runtime) == before
    assert sum(calls.values()) == 6

    record = drain(runtime, task_id, unlimited(calls))
    assert record.status == Status.SUCCEEDED
    assert all(n == 1 for n in calls.values())
    assert sum(calls.values()) == TOTAL_STEPS


def test_message_from_a_future_generation_is_rejected(setup):
    app, calls, runtime = setup
    task_id = app.client().start("tally", {"label": "f"}, task_id="future-1")
    before = snapshot_objects(runtime)
    context = ScriptedContext(None, executed=lambda: sum(calls.values()))
    assert app.handler(sqs_event(continuation(task_id, 7)), context) == {"batchItemFailures": []}
    assert snapshot_objects(runtime) == before
    assert sum(calls.values()) == 0


def test_same_task_id_started_twice_exists_once(setup):
    app, calls, runtime = setup
    client = app.client()
    assert client.start("tally", {"label": "once"}, task_id="once-1") == "once-1"
    assert client.start("tally", {"label": "twice"}, task_id="once-1") == "once-1"

    assert runtime.observer_store.list_keys("tasks/once-1/") == [record_key("once-1")]
    assert len(runtime.observer_store.versions(record_key("once-1"))) == 1
    assert runtime.record("once-1").state["label"] == "once"

    record = drain(runtime, "once-1", unlimited(calls))
    assert record.status == Status.SUCCEEDED
    assert sum(calls.values()) == TOTAL_STEPS  # the second start's message was fenced
    assert client.start("tally", {"label": "again"}, task_id="once-1") == "once-1"
    assert client.status("once-1").status == Status.SUCCEEDED


def test_live_lease_with_the_same_message_is_retried_later(setup):
    app, calls, _runtime = setup
    task_id = app.client().start("tally", {"label": "l"}, task_id="lease-1")

    # Deliver while a (simulated) live worker holds the lease for message "m-live".
    record, etag = app.records.load(task_id)
    record.status = Status.RUNNING
    record.lease = Lease(
        owner="other", expires_at=utcnow() + timedelta(hours=1), message_id="m-live"
    )
    app.records.swap(record, revision=etag)
    context = ScriptedContext(None, executed=lambda: sum(calls.values()))
    redelivered = app.handler(sqs_event(continuation(task_id, 0), message_ids=["m-live"]), context)
    duplicate = app.handler(sqs_event(continuation(task_id, 0), message_ids=["m-dup"]), context)
    assert redelivered == {"batchItemFailures": [{"itemIdentifier": "m-live"}]}
    assert duplicate == {"batchItemFailures": []}
    assert sum(calls.values()) == 0


def test_a_continuation_lost_between_write_and_send_is_sent_again(setup):
    app, calls, runtime = setup
    task_id = app.client().start("tally", {"label": "lost"}, task_id="lost-1")
    start = runtime.source.receive()[0]

    # The worker suspends the task, then "dies" before its send reaches SQS.
    context = ScriptedContext(4, executed=lambda: sum(calls.values()))
    event = sqs_event(start.body, message_ids=[start.message_id])
    with sends_lost(runtime):
        app.handler(event, context)
    assert runtime.record(task_id).status == Status.SUSPENDED
    assert runtime.source.receive() == []

    # A stale copy of another message only acknowledges; the suspending message resends.
    app.handler(sqs_event(start.body, message_ids=["a-copy"]), context)
    assert runtime.invoke_once() is None
    app.handler(sqs_event(start.body, message_ids=[start.message_id]), context)
    record = drain(runtime, task_id, unlimited(calls))
    assert record.status == Status.SUCCEEDED
    assert sum(calls.values()) == TOTAL_STEPS
