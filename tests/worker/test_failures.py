"""Failure paths: deaths, dead letters, limits, hostile records and forged messages.

In both flavours (``tests/flavours.py``), where the task body matters: a step that kills its
worker, a state that no longer validates, results and states over the size limit, the limit
of continuations, retryable and failing steps, writes that landed but reported an error,
deaths outside steps, and a record restored by hand. The async twins await ``async def``
steps. Dead letters, garbage records and forged messages never reach the task body: sync
only.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, RecordCorruptError, Status, TaskContext
from tests.conftest import (
    ScriptedContext,
    after_store_call,
    continuation,
    drain,
    record_key,
    record_versions,
    s3_error,
    share,
    snapshot_objects,
    sqs_event,
)
from tests.flavours import FLAVOURS
from tests.support import LocalRuntime, utcnow


class Job(BaseModel):
    items: int = 3
    done: list[str] = []


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process: nothing in the framework catches it."""


def forever(i: int = 0) -> ScriptedContext:
    return ScriptedContext(None, executed=lambda: 0)


def counting_job(flavour: str = "sync", **options: Any) -> tuple[Continuum, list[int]]:
    """An app whose task ``job`` takes ``items`` turns of one ``tick`` step each, and the list
    of the ticks that really ran."""
    app = Continuum(**options)
    ticks: list[int] = []

    def ended(ctx: TaskContext[Job]) -> list[str] | None:
        return ctx.state.done if len(ctx.state.done) >= ctx.state.items else None

    if flavour == "sync":

        @app.step
        def tick(i: int) -> int:
            ticks.append(i)
            return i

        @app.task(state=Job)
        def job(ctx: TaskContext[Job]) -> list[str] | None:
            ctx.state.done.append(str(tick(len(ctx.state.done))))
            return ended(ctx)

    else:

        @app.step
        async def tick(i: int) -> int:
            ticks.append(i)
            return i

        @app.task(state=Job)
        async def job(ctx: TaskContext[Job]) -> list[str] | None:
            ctx.state.done.append(str(await tick(len(ctx.state.done))))
            return ended(ctx)

    return app, ticks


def expire_lease(app: Continuum, task_id: str) -> None:
    """What the passing of a dead worker's deadline does to its record."""
    record, etag = app.records.load(task_id)
    assert record.status == Status.RUNNING
    record.lease.expires_at = utcnow() - timedelta(seconds=1)
    app.records.swap(record, revision=etag)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_that_kills_its_worker_every_time_fails_the_task_naming_it(aws, flavour):
    app = Continuum(max_step_crashes=3)
    attempts: list[int] = []

    if flavour == "sync":

        @app.step
        def fine(i: int) -> str:
            return f"ok {i}"

        @app.step
        def poison(i: int) -> str:
            attempts.append(i)
            raise WorkerDied

        @app.task(state=Job)
        def job(ctx: TaskContext[Job]) -> list[str] | None:
            ctx.state.done.append(fine(len(ctx.state.done)))
            ctx.state.done.append(poison(len(ctx.state.done)))
            return ctx.state.done

    else:

        @app.step
        async def fine(i: int) -> str:
            return f"ok {i}"

        @app.step
        async def poison(i: int) -> str:
            attempts.append(i)
            raise WorkerDied

        @app.task(state=Job)
        async def job(ctx: TaskContext[Job]) -> list[str] | None:
            ctx.state.done.append(await fine(len(ctx.state.done)))
            ctx.state.done.append(await poison(len(ctx.state.done)))
            return ctx.state.done

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="poison-1")
    body = continuation(task_id, 0)
    deaths = 0
    while not runtime.record(task_id).status.finished and deaths < 10:
        try:
            app.handler(sqs_event(body, message_ids=["m"]), forever())
        except WorkerDied:  # the worker "dies" inside the step
            deaths += 1
            expire_lease(app, task_id)  # its deadline passes
    record = runtime.record(task_id)
    assert record.status == Status.FAILED
    assert record.error.type == "StepCrashedWorker"
    assert record.error.step == "poison#1"
    assert "died" in record.error.message
    assert deaths == len(attempts) == 4  # one death blamed on no step, then three on this one
    assert record.counters.recoveries == 4


def test_dead_letter_marks_the_task_failed_with_the_reason(aws):
    app, _ = counting_job()

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    app.client().start("job", {}, task_id="dl-1")
    app.client().start("job", {}, task_id="dl-2")
    before = runtime.observer_store.get(record_key("dl-2")).etag
    event = sqs_event(continuation("dl-1", 0), continuation("dl-2", 5), "junk")
    event["Records"][0]["attributes"]["ApproximateReceiveCount"] = "6"

    assert app.dead_letter_handler(event, forever()) == {"batchItemFailures": []}

    record = runtime.record("dl-1")
    assert record.status == Status.FAILED
    assert record.error.type == "DeadLettered"
    assert "received 6 times" in record.error.message
    # A dead letter for a generation the task has not reached changes nothing.
    assert runtime.observer_store.get(record_key("dl-2")).etag == before


def test_dead_letter_for_a_task_that_moved_on_is_a_leftover(aws):
    app, ticks = counting_job()

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="moved-on")
    runtime.invoke_once(ScriptedContext(1, executed=lambda: len(ticks)))
    assert runtime.record(task_id).generation == 1
    before = snapshot_objects(runtime)
    app.dead_letter_handler(sqs_event(continuation(task_id, 0)), forever())  # older generation
    assert snapshot_objects(runtime) == before

    drain(runtime, task_id, forever)
    done = snapshot_objects(runtime)
    app.dead_letter_handler(sqs_event(continuation(task_id, 1)), forever())  # finished task
    assert snapshot_objects(runtime) == done
    assert runtime.record(task_id).status == Status.SUCCEEDED


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_state_that_no_longer_validates_fails_with_the_field(aws, flavour):
    old = Continuum()

    @old.task(state=Job, name="job")
    def job_v1(ctx: TaskContext[Job]) -> None:
        return None

    runtime = LocalRuntime(old, budget_s=900, backend=aws)
    old.client().start("job", {"items": 2}, task_id="migrated")

    class JobV2(BaseModel):
        items: list[int]  # changed type: the saved state no longer validates

    new = Continuum()

    if flavour == "sync":

        @new.task(state=JobV2, name="job")
        def job_v2(ctx: TaskContext[JobV2]) -> None:
            return None

    else:

        @new.task(state=JobV2, name="job")
        async def job_v2_async(ctx: TaskContext[JobV2]) -> None:
            return None

    share(new, runtime).handler(sqs_event(continuation("migrated", 0)), forever())
    record = runtime.record("migrated")
    assert record.status == Status.FAILED
    assert record.error.type == "InvalidInputError"
    assert "no longer validates against JobV2" in record.error.message
    assert "items" in record.error.message


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_step_result_over_the_size_limit_fails_the_task_naming_the_step(aws, flavour):
    app = Continuum(max_state_bytes=100_000)

    if flavour == "sync":

        @app.step(effect=True)
        def download() -> str:
            return "x" * 200_000

        @app.task(state=Job)
        def hoard(ctx: TaskContext[Job]) -> str:
            return download()[:10]

    else:

        @app.step(effect=True)
        async def download() -> str:
            return "x" * 200_000

        @app.task(state=Job)
        async def hoard(ctx: TaskContext[Job]) -> str:
            return (await download())[:10]

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("hoard", {}, task_id="hoard-1")
    record = drain(runtime, task_id, forever)
    assert record.status == Status.FAILED
    assert record.error.type == "PayloadTooLargeError"
    assert "the result of step 'download#0' is 200002 bytes" in record.error.message
    assert record.journal == []


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_state_over_the_size_limit_fails_the_task(aws, flavour):
    app = Continuum(max_state_bytes=50_000)

    if flavour == "sync":

        @app.task(state=Job)
        def grow(ctx: TaskContext[Job]) -> None:
            ctx.state.done.append("y" * 10_000)

    else:

        @app.task(state=Job)
        async def grow(ctx: TaskContext[Job]) -> None:
            ctx.state.done.append("y" * 10_000)

    runtime = LocalRuntime(app, budget_s=0.3, backend=aws)
    task_id = app.client().start("grow", {}, task_id="grow-1")
    record = drain(runtime, task_id, lambda i: None)
    assert record.status == Status.FAILED
    assert "the state is" in record.error.message
    assert record.state is None


def test_a_record_edited_into_garbage_is_reported_and_nothing_else_changes(aws, caplog):
    app, _ = counting_job()

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    app.client().start("job", {}, task_id="edited")
    app.client().start("job", {}, task_id="intact")
    runtime.observer_store.put(record_key("edited"), b'{"task_id": "ed')
    before = snapshot_objects(runtime)

    result = app.handler(sqs_event(continuation("edited", 0)), forever())

    assert result == {"batchItemFailures": []}  # acknowledged: a retry cannot repair it
    assert "record does not parse" in caplog.text
    assert "edited" in caplog.text
    assert snapshot_objects(runtime) == before
    with pytest.raises(RecordCorruptError, match="restore an earlier version"):
        app.client().status("edited")


def test_forged_and_unsigned_messages_are_rejected_when_signing(aws, caplog):
    app = Continuum(signing_key="s3cret")
    runs: list[int] = []

    @app.step
    def act() -> int:
        runs.append(1)
        return 1

    @app.task(state=Job)
    def job(ctx: TaskContext[Job]) -> int:
        return act()

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="signed")
    unsigned = continuation(task_id, 0)
    forged = unsigned[:-1] + ',"sig":"' + "0" * 64 + '"}'
    for body in (unsigned, forged):
        assert app.handler(sqs_event(body), forever()) == {"batchItemFailures": []}
    assert runs == []
    assert "not signed" in caplog.text
    assert "signature does not match" in caplog.text

    record = drain(runtime, task_id, forever)  # the real, signed start message
    assert record.status == Status.SUCCEEDED
    assert runs == [1]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_task_over_max_continuations_fails_with_the_reason(aws, flavour):
    app = Continuum()
    ticks: list[int] = []

    if flavour == "sync":

        @app.step
        def tick(i: int) -> int:
            ticks.append(i)
            return i

        @app.task(state=Job, max_continuations=2)
        def endless(ctx: TaskContext[Job]) -> None:
            ctx.state.done.append(str(tick(len(ctx.state.done))))

    else:

        @app.step
        async def tick(i: int) -> int:
            ticks.append(i)
            return i

        @app.task(state=Job, max_continuations=2)
        async def endless(ctx: TaskContext[Job]) -> None:
            ctx.state.done.append(str(await tick(len(ctx.state.done))))

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("endless", {}, task_id="endless-1")
    # Every invocation may run one step, then must suspend.
    record = drain(runtime, task_id, lambda i: ScriptedContext(1, executed=lambda: len(ticks)))
    assert record.status == Status.FAILED
    assert record.error.type == "MaxContinuationsExceeded"
    assert "the limit is 2" in record.error.message
    assert len(ticks) == 3


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_non_retryable_error_fails_at_once_and_retryable_ones_retry(aws, flavour):
    app = Continuum()
    attempts = {"flaky": 0, "broken": 0}

    def flaky_attempt() -> str:
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise ConnectionError("reset")
        return "ok"

    def broken_attempt() -> str:
        attempts["broken"] += 1
        raise ValueError("bad request")

    if flavour == "sync":

        @app.step(retries=3, backoff_s=0, retry_on=(ConnectionError,))
        def flaky() -> str:
            return flaky_attempt()

        @app.step(retries=3, backoff_s=0, retry_on=(ConnectionError,))
        def broken() -> str:
            return broken_attempt()

        @app.task(state=Job)
        def job(ctx: TaskContext[Job]) -> str:
            return flaky() + broken()

    else:

        @app.step(retries=3, backoff_s=0, retry_on=(ConnectionError,))
        async def flaky() -> str:
            return flaky_attempt()

        @app.step(retries=3, backoff_s=0, retry_on=(ConnectionError,))
        async def broken() -> str:
            return broken_attempt()

        @app.task(state=Job)
        async def job(ctx: TaskContext[Job]) -> str:
            return await flaky() + await broken()

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="retry-1")
    record = drain(runtime, task_id, forever)
    assert attempts == {"flaky": 3, "broken": 1}
    assert record.status == Status.FAILED
    assert record.error.step == "broken#1"
    assert "bad request" in record.error.message


@pytest.mark.parametrize(
    "code", ["PreconditionFailed", "InternalError", "SlowDown", "UnknownError"]
)
@pytest.mark.parametrize("on_call", [2, 3, 4])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_write_that_landed_but_reported_an_error_loses_nothing(aws, code, on_call, flavour):
    app, runs = counting_job(flavour, persist_every_s=0)

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="landed")
    # Write 1 is the create; 2 the claim; 3 and 4 journal saves. From the on_call-th write of
    # the record: let it land, then report ``code``.
    writes = []

    def report_error(key):
        if key.endswith("record.json"):
            writes.append(key)
            if len(writes) == on_call:
                raise s3_error(runtime, code, key)

    with after_store_call(runtime, "put", report_error):
        for _ in range(20):
            if runtime.record(task_id).status.finished:
                break
            with contextlib.suppress(Exception):  # the handler may give the message back
                runtime.invoke_once(forever())
            if app.records.load(task_id)[0].status == Status.RUNNING:
                expire_lease(app, task_id)  # the given-back message returns after the deadline
            time.sleep(0.01)
    record = runtime.record(task_id)
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == ["0", "1", "2"]
    assert sorted(set(runs)) == [0, 1, 2]


def test_superseded_state_blobs_are_removed_and_readers_never_see_a_gap(aws):
    app = Continuum(inline_limit_bytes=1024)
    ticks: list[int] = []

    @app.step
    def tick(i: int) -> int:
        ticks.append(i)
        return i

    @app.task(state=Job)
    def grow(ctx: TaskContext[Job]) -> int | None:
        ctx.state.done.append(f"{tick(len(ctx.state.done))}:" + "z" * 600)
        return len(ctx.state.done) if len(ctx.state.done) >= 6 else None

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("grow", {}, task_id="grower")
    # Every invocation runs two steps, so each save carries a new large state.
    record = drain(runtime, task_id, lambda i: ScriptedContext(2, executed=lambda: len(ticks)))
    assert record.status == Status.SUCCEEDED
    store = runtime.observer_store
    live = store.list_keys("tasks/grower/blobs/")
    # Only the blob the final record references is current; the others are noncurrent
    # versions that the lifecycle rule expires.
    assert live == [f"tasks/grower/blobs/{record.state_ref.sha256}.json.gz"]
    refs = [raw["state_ref"] for raw in record_versions(runtime, task_id).values()]
    blobs = {f"tasks/grower/blobs/{ref['sha256']}.json.gz" for ref in refs if ref}
    assert len([key for key in blobs if store.versions(key)]) > 1
    assert app.client().status(task_id).status == Status.SUCCEEDED


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_deaths_outside_steps_blame_no_step(aws, flavour):
    app, runs = counting_job(flavour, max_step_crashes=3)

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="unlucky")
    armed = {"on": False}

    def die_after_claim(_key):
        if armed["on"]:  # the worker dies right after its claim is written
            raise WorkerDied

    body = continuation(task_id, 0)
    with after_store_call(runtime, "put", die_after_claim):
        for _ in range(5):
            armed["on"] = True
            with pytest.raises(WorkerDied):
                app.handler(sqs_event(body, message_ids=["m"]), forever())
            armed["on"] = False
            expire_lease(app, task_id)

    record = drain(runtime, task_id, forever)
    assert record.status == Status.SUCCEEDED  # five deaths, but never inside a step
    assert record.counters.recoveries == 5
    assert runs == [0, 1, 2]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_resume_after_a_record_was_restored_by_hand(aws, flavour):
    app, ticks = counting_job(flavour)

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("job", {}, task_id="restored")
    runtime.invoke_once(ScriptedContext(1, executed=lambda: len(ticks)))
    good = runtime.observer_store.get(record_key(task_id)).body
    # Someone breaks the record; its continuation is acknowledged as unreadable and gone.
    runtime.observer_store.put(record_key(task_id), b"{oops")
    assert runtime.invoke_once(forever()) is not None
    assert runtime.invoke_once(forever()) is None
    # An operator restores the last good version and resumes the task.
    runtime.observer_store.put(record_key(task_id), good)
    assert app.client().resume(task_id) == 1
    record = drain(runtime, task_id, forever)
    assert record.status == Status.SUCCEEDED
    assert ticks == [0, 1, 2]
    assert app.client().resume(task_id) == 1  # finished: nothing is sent
    assert runtime.invoke_once(forever()) is None
