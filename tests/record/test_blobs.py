"""Blobs beside the record: never missing while a record points at them, never leaked, never
expired under a live task; and an earlier checkpoint stays restorable.

The cases: a blob reused after another worker deleted it, a second start that would leak its
input blob, a fenced finish that would tag the live task's blobs, restoring an earlier record
version, and a pause cursor that must be size-checked and moved to a blob like any value.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext, current_context
from tests.conftest import (
    ScriptedContext,
    deliver,
    drain,
    raw_record,
    record_key,
    record_versions,
    share,
    tags_of,
)
from tests.support import FINISHED_TAG, LocalRuntime

# -- helpers -------------------------------------------------------------------------------


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


def current_blobs(runtime: LocalRuntime, task_id: str) -> list[str]:
    return runtime.observer_store.list_keys(f"tasks/{task_id}/blobs/")


def tagged_finished(runtime: LocalRuntime, key: str) -> bool:
    name, _, value = FINISHED_TAG.partition("=")
    return tags_of(runtime, key).get(name) == value


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
    runtime = LocalRuntime(a, budget_s=900, backend=aws)
    b = share(two_worker_app(live), runtime)
    task_id = a.client().start("crawl", {}, task_id="shared-blob")

    def one_more_step() -> ScriptedContext:
        return ScriptedContext(1, executed=lambda: len(live))

    # A: fetch#0 runs; its large result goes to blob X; A suspends before note.
    assert deliver(a, runtime, one_more_step()) is not None
    first = raw_record(runtime, task_id)
    assert (first["generation"], len(digests(first))) == (1, 1)
    # B: replays fetch, runs note, ends the turn and suspends: X is no longer referenced, so
    # B deletes it.
    assert deliver(b, runtime, one_more_step()) is not None
    assert raw_record(runtime, task_id)["generation"] == 2
    # A again: turn 1's fetch produces the very same content, X, which A believes it stored.
    assert deliver(a, runtime, one_more_step()) is not None
    third = raw_record(runtime, task_id)
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

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    client = app.client()
    assert client.start("hold", {"payload": "first " * 500}, task_id="twice") == "twice"
    assert client.start("hold", {"payload": "second " * 500}, task_id="twice") == "twice"
    drain(runtime, "twice", lambda i: ScriptedContext(None, executed=lambda: 0))
    assert client.status("twice").status == Status.SUCCEEDED

    referenced = digests(raw_record(runtime, "twice"))
    leaked = [
        key
        for key in current_blobs(runtime, "twice")
        if digest_of(key) not in referenced and not tagged_finished(runtime, key)
    ]
    assert leaked == []


# -- case 11: a fenced finish must not expire the live task's blobs ---------------------------


def test_a_finish_that_loses_the_record_tags_none_of_the_current_records_blobs(aws):
    app = Continuum(inline_limit_bytes=1024)
    key = record_key("fenced-finish")

    def another_worker_claims() -> None:
        """Another worker takes the record (its lease replaces ours), as after our deadline."""
        store = runtime.observer_store
        stored = store.get(key)
        raw = json.loads(stored.body)
        assert raw["lease"] is not None
        raw["lease"]["owner"] = "another-worker"
        raw["lease"]["message_id"] = "another-message"
        store.put(key, json.dumps(raw, indent=1).encode(), if_match=stored.etag)

    @app.step
    def last_step() -> str:
        another_worker_claims()
        return "done"

    @app.task(state=Big)
    def finishing(ctx: TaskContext[Big]) -> str:
        return last_step()

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    app.client().start("finishing", {}, task_id="fenced-finish")
    assert runtime.invoke_once(ScriptedContext(None, executed=lambda: 0)) is not None

    current = raw_record(runtime, "fenced-finish")
    assert current["status"] == "running"  # our finish was fenced: the other worker has it
    assert current["lease"]["owner"] == "another-worker"
    referenced = digests(current)
    assert referenced, "the state should live in a blob"
    expiring = [
        key
        for key in current_blobs(runtime, "fenced-finish")
        if digest_of(key) in referenced and tagged_finished(runtime, key)
    ]
    assert expiring == []


def test_a_retried_task_takes_the_finished_tag_off_its_record_and_blobs(aws, caplog):
    """A retry reopens a failed task: the lifecycle rule must not expire its record or the
    blobs it still uses, on both backends (moto's PutObjectTagging fails on an empty tag set,
    so the tag is overwritten rather than emptied)."""
    app = Continuum(inline_limit_bytes=1024)
    attempts: list[int] = []

    @app.task(state=Big)
    def flaky(ctx: TaskContext[Big]) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first time unlucky")
        return "done"

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    app.client().start("flaky", {}, task_id="reopened")
    forever = lambda _: ScriptedContext(None, executed=lambda: 0)  # noqa: E731
    assert drain(runtime, "reopened", forever).status == Status.FAILED
    key = record_key("reopened")
    used = [k for k in current_blobs(runtime, "reopened") if tagged_finished(runtime, k)]
    assert tagged_finished(runtime, key)
    assert used, "a finished task's blobs are tagged"

    caplog.set_level("WARNING", logger="continuum")
    app.client().retry("reopened")
    assert not tagged_finished(runtime, key)
    assert [k for k in used if tagged_finished(runtime, k)] == []
    assert "could not untag" not in caplog.text
    assert drain(runtime, "reopened", forever).status == Status.SUCCEEDED


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

    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("grow", {}, task_id="restore-me")
    # Every invocation runs one turn (a new state blob) and suspends: five checkpoints.
    drain(runtime, task_id, lambda i: ScriptedContext(1, executed=lambda: len(ticks)))
    assert app.client().status(task_id).status == Status.SUCCEEDED
    expected = app.client().result(task_id)

    # The operator picks the first suspended checkpoint and makes it current again.
    checkpoints = {
        (raw["status"], raw["generation"]): version_id
        for version_id, raw in record_versions(runtime, task_id).items()
    }
    first = checkpoints[("suspended", 1)]
    assert ("suspended", 3) in checkpoints  # superseded state blobs were deleted since
    store = runtime.observer_store
    store.put(record_key(task_id), store.get(record_key(task_id), version_id=first).body)

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
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("fetch_all", {}, task_id="big-cursor")
    runtime.invoke_once(ScriptedContext(None, executed=lambda: 0))

    assert app.client().status(task_id).status == Status.SUSPENDED
    body = runtime.observer_store.get(record_key(task_id)).body
    assert b"CURSOR" not in body
    assert len(body) < 16_000, f"record.json is {len(body)} bytes with a 1 KiB inline limit"
    drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: 0))
    assert app.client().result(task_id) == 50
    assert len(runs) == 2


def test_a_pause_cursor_over_max_state_bytes_fails_the_task_naming_the_step(aws):
    app, _runs = paging_app(200_000, max_state_bytes=100_000)
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    task_id = app.client().start("fetch_all", {}, task_id="huge-cursor")
    drain(runtime, task_id, lambda i: ScriptedContext(None, executed=lambda: 0), limit=5)

    status = app.client().status(task_id)
    assert status.status == Status.FAILED, f"{status.status}: the cursor was accepted"
    assert "download" in f"{status.error.step} {status.error.message}"
    assert "100000" in status.error.message or "limit" in status.error.message
