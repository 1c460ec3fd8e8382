"""Apps of different ages and keys share one bucket and queue.

The cases: rotating the signing key must not strand tasks in flight, ``state_version`` is
checked, not only stored, and an older worker does not reject a newer record or message for
its extra fields.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from tests.conftest import (
    ScriptedContext,
    continuation,
    deliver,
    drain,
    purge_queue,
    record_key,
    share,
    snapshot_objects,
    sqs_event,
)
from tests.support import LocalRuntime


class Job(BaseModel):
    done: list[int] = []


def job_app(ticks: list[int], *, version: int = 1, **options: Any) -> Continuum:
    """An app whose task ``job`` takes three turns of one ``tick`` step each."""
    app = Continuum(**options)

    @app.step
    def tick(i: int) -> int:
        ticks.append(i)
        return i

    @app.task(state=Job, version=version)
    def job(ctx: TaskContext[Job]) -> list[int] | None:
        ctx.state.done.append(tick(len(ctx.state.done)))
        return ctx.state.done if len(ctx.state.done) >= 3 else None

    return app


# -- case 6: signing key rotation ------------------------------------------------------------


@pytest.mark.parametrize("configured_by", ["argument", "environment"])
def test_a_task_in_flight_survives_a_signing_key_rotation(aws, monkeypatch, configured_by):
    ticks: list[int] = []
    old = job_app(ticks, signing_key="old")
    runtime = LocalRuntime(old, budget_s=900, backend=aws)
    task_id = old.client().start("job", {}, task_id="rotated")
    runtime.invoke_once(ScriptedContext(1, executed=lambda: len(ticks)))
    assert old.client().status(task_id).generation == 1  # its continuation is signed "old"

    # The deployment rotates: "new" signs, "old" is still accepted.
    if configured_by == "argument":
        rotating = share(job_app(ticks, signing_key="new,old"), runtime)
    else:
        monkeypatch.setenv("CONTINUUM_SIGNING_KEY", "new,old")
        rotating = share(job_app(ticks), runtime)
    deliver(rotating, runtime, ScriptedContext(1, executed=lambda: len(ticks)))
    status = rotating.client().status(task_id)
    assert status.generation == 2, f"the old-signed continuation was refused: {status.status}"

    # Later "old" is retired: what the rotating app sent verifies with "new" alone.
    monkeypatch.delenv("CONTINUUM_SIGNING_KEY", raising=False)
    new_only = share(job_app(ticks, signing_key="new"), runtime)
    for _ in range(5):
        if new_only.client().status(task_id).status.finished:
            break
        if deliver(new_only, runtime, ScriptedContext(None, executed=lambda: len(ticks))) is None:
            break
    status = new_only.client().status(task_id)
    assert status.status == Status.SUCCEEDED, f"{status.status} at generation {status.generation}"
    assert status.result == [0, 1, 2]
    assert ticks == [0, 1, 2]


# -- surprise d: a record from a newer task version is not run by older code ------------------


def test_a_record_from_a_newer_task_version_is_not_run_by_older_code(aws, caplog):
    ticks: list[int] = []
    newer = job_app(ticks, version=2)
    runtime = LocalRuntime(newer, budget_s=900, backend=aws)
    task_id = newer.client().start("job", {}, task_id="versioned")  # state_version 2

    older = share(job_app(ticks, version=1), runtime)  # a worker still on the old code
    before = snapshot_objects(runtime)
    result = deliver(older, runtime, ScriptedContext(None, executed=lambda: len(ticks)))

    assert ticks == [], "version-1 code ran a version-2 record"
    status = older.client().status(task_id)
    if status.status == Status.FAILED:
        assert "version" in status.error.message
    else:  # left untouched for a newer worker, its message sent again, a clear error logged
        assert snapshot_objects(runtime) == before
        assert result["batchItemFailures"] == []
        assert "state version" in caplog.text


# -- surprise f: extra fields from newer writers are tolerated --------------------------------


def test_a_record_with_an_unknown_top_level_field_runs_and_keeps_the_field(aws):
    ticks: list[int] = []
    app = job_app(ticks)
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="newer-record")
    store, key = runtime.observer_store, record_key(task_id)
    raw = json.loads(store.get(key).body)
    raw["written_by_a_newer_worker"] = {"feature": "priorities", "priority": 3}
    store.put(key, json.dumps(raw, indent=1).encode())

    drain(runtime, task_id, lambda i: ScriptedContext(1, executed=lambda: len(ticks)))

    assert app.client().result(task_id) == [0, 1, 2]
    final = json.loads(store.get(key).body)
    assert final.get("written_by_a_newer_worker") == {"feature": "priorities", "priority": 3}


def test_a_continuation_with_an_unknown_field_is_accepted(aws):
    ticks: list[int] = []
    app = job_app(ticks)
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="newer-message")
    purge_queue(runtime)  # only our message below remains

    body = json.loads(continuation(task_id, 0, reason="start"))
    body["trace_id"] = "1-5f84c7a9-6f1c2a3b4c5d6e7f8a9b0c1d"  # a newer sender's extra field
    result = app.handler(
        sqs_event(json.dumps(body)), ScriptedContext(None, executed=lambda: len(ticks))
    )

    assert result == {"batchItemFailures": []}
    status = app.client().status(task_id)
    assert status.status == Status.SUCCEEDED, f"{status.status}: the message was refused"
    assert status.result == [0, 1, 2]
