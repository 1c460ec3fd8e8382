"""Blobs beside the record: never missing while a record points at them, never leaked, never
expired under a live task; and an earlier checkpoint stays restorable.

Issue "Harden the core", cases 1 (a blob reused after another worker deleted it), 10 (a second
start leaks its input blob), 11 (a fenced finish tags the live task's blobs), 12 (restoring an
earlier record version) and surprise e (a pause cursor is never size-checked nor moved to a blob).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext, current_context
from tests.conftest import ScriptedContext, drain
from tests.support import BUCKET, FINISHED_TAG, REGION, LocalRuntime, event_record

# -- helpers -------------------------------------------------------------------------------


def own_clients() -> dict[str, Any]:
    """Fresh S3 and SQS clients: what a second warm Lambda environment has."""
    options = {"region_name": REGION, "aws_access_key_id": "x", "aws_secret_access_key": "x"}
    return {
        "s3_client": boto3.client("s3", **options),
        "sqs_client": boto3.client("sqs", **options),
    }


def deliver(app: Continuum, runtime: LocalRuntime, context: Any) -> dict | None:
    """Receive one continuation from the shared queue and hand it to ``app``'s handler, as
    the event source would hand it to whichever environment is free."""
    messages = runtime.source.receive()
    if not messages:
        return None
    message = messages[0]
    result = app.handler({"Records": [event_record(message, runtime.queue_arn)]}, context)
    failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
    if message.message_id not in failed:
        runtime.source.delete(message.receipt_handle)
    return result


def raw_record(s3: Any, task_id: str, version_id: str | None = None) -> dict:
    extra = {"VersionId": version_id} if version_id else {}
    body = s3.get_object(Bucket=BUCKET, Key=f"tasks/{task_id}/record.json", **extra)["Body"]
    return json.loads(body.read())


def digests(value: Any) -> set[str]:
    """Every blob digest a raw record references, wherever its references sit."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("sha256"), str):
            found.add(value["sha256"])
        for item in value.values():
            found |= digests(item)
    elif isinstance(value, list):
        for item in value:
            found |= digests(item)
    return found


def current_blobs(s3: Any, task_id: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"tasks/{task_id}/blobs/")
    return [o["Key"] for o in listed.get("Contents", [])]


def tagged_finished(s3: Any, key: str) -> bool:
    tags = s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
    name, _, value = FINISHED_TAG.partition("=")
    return {"Key": name, "Value": value} in tags


def digest_of(key: str) -> str:
    return key.rsplit("/", 1)[-1].split(".", 1)[0]


class Big(BaseModel):
    payload: str = "p" * 3000
    n: int = 0
    notes: list[str] = []


# -- case 1: two warm workers, one blob ------------------------------------------------------


class Crawl(BaseModel):
    n: int = 0
    notes: list[str] = []


def two_worker_app(live: list[str], **options: Any) -> Continuum:
    app = Continuum(inline_limit_bytes=1024, **options)

    @app.step
    def fetch(turn: int) -> str:
        live.append(f"fetch {turn}")
        return "the same large page " * 200  # well over the inline limit: a blob

    @app.step
    def note(turn: int) -> str:
        live.append(f"note {turn}")
        return f"note {turn}"

    @app.task(state=Crawl)
    def crawl(ctx: TaskContext[Crawl]) -> list[str] | None:
        page = fetch(ctx.state.n)
        ctx.state.notes.append(f"{note(ctx.state.n)} ({len(page)})")
        ctx.state.n += 1
        return ctx.state.notes if ctx.state.n >= 4 else None

    return app


def test_a_blob_another_worker_deleted_is_uploaded_again_when_reused(aws):
    live: list[str] = []
    a = two_worker_app(live)
    runtime = LocalRuntime(a, budget_s=900)
    b = two_worker_app(live, bucket=BUCKET, queue_url=runtime.queue_url, **own_clients())
    task_id = a.client().start("crawl", {}, task_id="shared-blob")

    def one_more_step() -> ScriptedContext:
        return ScriptedContext(1, executed=lambda: len(live))

    # A: fetch#0 runs; its large result goes to blob X; A suspends before note.
    assert deliver(a, runtime, one_more_step()) is not None
    first = raw_record(runtime.s3, task_id)
    assert (first["generation"], len(digests(first))) == (1, 1)
    # B: replays fetch, runs note, ends the turn and suspends: X is no longer referenced, so
    # B deletes it.
    assert deliver(b, runtime, one_more_step()) is not None
    assert raw_record(runtime.s3, task_id)["generation"] == 2
    # A again: turn 1's fetch produces the very same content, X, which A believes it stored.
    assert deliver(a, runtime, one_more_step()) is not None
    third = raw_record(runtime.s3, task_id)
    assert third["generation"] == 3
    assert digests(third) == digests(first)  # the same blob X, referenced again

    record = drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: len(live)))
    status = a.client().status(task_id)
    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == [f"note {i} (4000)" for i in range(4)]
    assert record.status == Status.SUCCEEDED


# -- case 10: a second start of the same id leaks nothing ------------------------------------


def test_a_second_start_of_the_same_id_leaves_no_unreferenced_untagged_blob(aws):
    app = Continuum(inline_limit_bytes=1024)

    @app.task(state=Big)
    def hold(ctx: TaskContext[Big]) -> int:
        return len(ctx.state.payload)

    runtime = LocalRuntime(app, budget_s=900)
    client = app.client()
    assert client.start("hold", {"payload": "first " * 500}, task_id="twice") == "twice"
    assert client.start("hold", {"payload": "second " * 500}, task_id="twice") == "twice"
    drain(runtime, "twice", lambda i: ScriptedContext(None, executed=lambda: 0))
    assert client.status("twice").status == Status.SUCCEEDED

    referenced = digests(raw_record(runtime.s3, "twice"))
    leaked = [
        key
        for key in current_blobs(runtime.s3, "twice")
        if digest_of(key) not in referenced and not tagged_finished(runtime.s3, key)
    ]
    assert leaked == []


# -- case 11: a fenced finish must not expire the live task's blobs ---------------------------


def test_a_finish_that_loses_the_record_tags_none_of_the_current_records_blobs(aws):
    app = Continuum(inline_limit_bytes=1024)
    other_s3 = own_clients()["s3_client"]
    key = "tasks/fenced-finish/record.json"

    def another_worker_claims() -> None:
        """Another worker takes the record (its lease replaces ours), as after our deadline."""
        stored = other_s3.get_object(Bucket=BUCKET, Key=key)
        raw = json.loads(stored["Body"].read())
        assert raw["lease"] is not None
        raw["lease"]["owner"] = "another-worker"
        raw["lease"]["message_id"] = "another-message"
        other_s3.put_object(
            Bucket=BUCKET, Key=key, Body=json.dumps(raw, indent=1).encode(), IfMatch=stored["ETag"]
        )

    @app.step
    def last_step() -> str:
        another_worker_claims()
        return "done"

    @app.task(state=Big)
    def finishing(ctx: TaskContext[Big]) -> str:
        return last_step()

    runtime = LocalRuntime(app, budget_s=900)
    app.client().start("finishing", {}, task_id="fenced-finish")
    assert runtime.invoke_once(ScriptedContext(None, executed=lambda: 0)) is not None

    current = raw_record(runtime.s3, "fenced-finish")
    assert current["status"] == "running"  # our finish was fenced: the other worker has it
    assert current["lease"]["owner"] == "another-worker"
    referenced = digests(current)
    assert referenced, "the state should live in a blob"
    expiring = [
        key
        for key in current_blobs(runtime.s3, "fenced-finish")
        if digest_of(key) in referenced and tagged_finished(runtime.s3, key)
    ]
    assert expiring == []


# -- case 12: an earlier checkpoint can be restored and resumed -------------------------------


def test_a_restored_earlier_record_version_completes_from_that_checkpoint(aws):
    app = Continuum(inline_limit_bytes=1024)
    ticks: list[int] = []

    @app.step
    def tick(i: int) -> int:
        ticks.append(i)
        return i

    @app.task(state=Big)
    def grow(ctx: TaskContext[Big]) -> list[str] | None:
        ctx.state.notes.append(f"{tick(ctx.state.n)}:" + "z" * 300)
        ctx.state.n += 1
        return [n[:2] for n in ctx.state.notes] if ctx.state.n >= 6 else None

    runtime = LocalRuntime(app, budget_s=900)
    task_id = app.client().start("grow", {}, task_id="restore-me")
    # Every invocation runs one turn (a new state blob) and suspends: five checkpoints.
    drain(runtime, task_id, lambda i: ScriptedContext(1, executed=lambda: len(ticks)))
    assert app.client().status(task_id).status == Status.SUCCEEDED
    expected = app.client().result(task_id)

    # The operator picks the first suspended checkpoint and makes it current again.
    versions = runtime.s3.list_object_versions(Bucket=BUCKET, Prefix=f"tasks/{task_id}/record")
    checkpoints = {
        (raw["status"], raw["generation"]): v["VersionId"]
        for v in versions["Versions"]
        for raw in [raw_record(runtime.s3, task_id, v["VersionId"])]
    }
    first = checkpoints[("suspended", 1)]
    assert ("suspended", 3) in checkpoints  # superseded state blobs were deleted since
    runtime.s3.copy_object(
        Bucket=BUCKET,
        Key=f"tasks/{task_id}/record.json",
        CopySource={"Bucket": BUCKET, "Key": f"tasks/{task_id}/record.json", "VersionId": first},
    )

    # Today the superseded state blob of that checkpoint is gone from the current listing
    # (only a noncurrent version keeps it), and reading the record fails with a private error.
    app.client().resume(task_id)
    drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: len(ticks)))
    status = app.client().status(task_id)
    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == expected


# -- surprise e: a pause cursor is size-checked and moves to a blob ---------------------------


class Pages(BaseModel):
    url: str = "https://example.com"


def paging_app(cursor_bytes: int, **options: Any) -> tuple[Continuum, list[int]]:
    app = Continuum(**options)
    runs: list[int] = []

    @app.step
    def download(url: str) -> int:
        ctx = current_context()
        runs.append(1)
        if ctx.cursor is None:
            ctx.pause({"pages": ["x" * 1000] * (cursor_bytes // 1000), "marker": "CURSOR"})
        return len(ctx.cursor["pages"])

    @app.task(state=Pages)
    def fetch_all(ctx: TaskContext[Pages]) -> int:
        return download(ctx.state.url)

    return app, runs


def test_a_pause_cursor_over_the_inline_limit_is_stored_in_a_blob(aws):
    app, runs = paging_app(50_000, inline_limit_bytes=1024)
    runtime = LocalRuntime(app, budget_s=900)
    task_id = app.client().start("fetch_all", {}, task_id="big-cursor")
    runtime.invoke_once(ScriptedContext(None, executed=lambda: 0))

    assert app.client().status(task_id).status == Status.SUSPENDED
    body = runtime.s3.get_object(Bucket=BUCKET, Key=f"tasks/{task_id}/record.json")["Body"].read()
    assert b"CURSOR" not in body
    assert len(body) < 16_000, f"record.json is {len(body)} bytes with a 1 KiB inline limit"
    drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: 0))
    assert app.client().result(task_id) == 50
    assert len(runs) == 2


def test_a_pause_cursor_over_max_state_bytes_fails_the_task_naming_the_step(aws):
    app, _runs = paging_app(200_000, max_state_bytes=100_000)
    runtime = LocalRuntime(app, budget_s=900)
    task_id = app.client().start("fetch_all", {}, task_id="huge-cursor")
    drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: 0), limit=5)

    status = app.client().status(task_id)
    assert status.status == Status.FAILED, f"{status.status}: the cursor was accepted"
    assert "download" in f"{status.error.step} {status.error.message}"
    assert "100000" in status.error.message or "limit" in status.error.message
