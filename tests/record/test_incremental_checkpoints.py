"""A long conversation is checkpointed incrementally, and its segments are kept as safely as
every other blob: uploaded unless provably there, removed only by the lease holder, swept at
the finish, restorable with an earlier record version, verified when read.

A checkpoint uploads what changed since the last one.
"""

from __future__ import annotations

import hashlib
from itertools import accumulate
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import BlobMissingError, Continuum, Status, TaskContext
from tests.conftest import (
    ScriptedContext,
    agent_conversation,
    destroy,
    drain,
    raw_record,
    record_key,
    record_versions,
    tags_of,
    uploads,
)
from tests.support import FINISHED_TAG, LocalRuntime, dump_json

#: Turns of the starting conversation: about 850 KB of JSON, ten segments.
TURNS = 1000


class Chat(BaseModel):
    topic: str = "tides"
    messages: list[dict[str, Any]] = []
    #: each turn rewrites the text of these messages (a redaction, a summary in place)
    rewrite: list[int] = []
    turns: int = 0
    until: int = 1


def chat_app() -> tuple[Continuum, list[int]]:
    app = Continuum()
    replies: list[int] = []

    @app.step
    def reply(n: int) -> str:
        replies.append(n)
        return f"Reply {n}: the tide turns twice a day."

    @app.task(state=Chat)
    def chat(ctx: TaskContext[Chat]) -> str | None:
        s = ctx.state
        text = reply(len(s.messages))
        for i in s.rewrite:  # the same length, other text: only its segment's bytes change
            block = s.messages[i]["content"][0]
            block["text"] = block["text"][1:] + block["text"][0]
        s.messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        s.turns += 1
        if s.turns < s.until:
            return None
        return hashlib.sha256(dump_json(s.messages)).hexdigest()

    return app, replies


def one_turn(replies: list[int]) -> ScriptedContext:
    """An invocation that runs one turn and then finds its deadline near."""
    return ScriptedContext(1, executed=lambda: len(replies))


def segment_digests(raw: dict) -> list[str]:
    return [ref["sha256"] for listed in raw["state_segments"] for ref in listed["segments"]]


def blob_key(task_id: str, digest: str) -> str:
    return f"tasks/{task_id}/blobs/{digest}.json.gz"


def started(aws: str, task_id: str, **state: Any) -> tuple[Continuum, LocalRuntime, list[int]]:
    app, replies = chat_app()
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    app.client().start("chat", {"messages": agent_conversation(TURNS), **state}, task_id=task_id)
    return app, runtime, replies


# -- what a checkpoint uploads ----------------------------------------------------------------


def test_a_turn_appended_to_a_long_conversation_uploads_only_the_tail_and_the_record(aws):
    _app, runtime, replies = started(aws, "appender", until=5)
    runtime.invoke_once(one_turn(replies))  # a first turn: the history is stored
    before = raw_record(runtime, "appender")
    assert len(segment_digests(before)) > 5

    with uploads(runtime) as puts:
        runtime.invoke_once(one_turn(replies))  # claim, one turn, suspend

    after = raw_record(runtime, "appender")
    assert after["generation"] == 2
    blobs = [(key, size) for key, size in puts if "/blobs/" in key]
    known = {blob_key("appender", digest) for digest in segment_digests(before)}
    assert not [key for key, _ in blobs if key in known], "a stored segment was uploaded again"
    assert len(blobs) <= 2  # the new tail's blob, and a segment the tail may have sealed
    state_bytes = len(dump_json(runtime.record("appender").state))
    assert sum(size for _, size in puts) < state_bytes / 10, puts
    assert segment_digests(after)[: len(segment_digests(before))] == segment_digests(before)


def test_rewriting_an_early_message_re_uploads_only_the_segment_that_holds_it(aws):
    _app, runtime, replies = started(aws, "rewriter", rewrite=[400], until=5)
    runtime.invoke_once(one_turn(replies))  # each turn rewrites message 400
    before = raw_record(runtime, "rewriter")

    with uploads(runtime) as puts:
        runtime.invoke_once(one_turn(replies))

    after = segment_digests(raw_record(runtime, "rewriter"))
    sealed = before["state_segments"][0]["segments"]
    holder = next(i for i, n in enumerate(accumulate(s["items"] for s in sealed)) if n > 400)
    assert holder > 0  # an early message, not one of the first segment
    changed = [i for i, (a, b) in enumerate(zip(segment_digests(before), after)) if a != b]
    assert changed == [holder]
    blobs = [key for key, _ in puts if "/blobs/" in key]
    assert blob_key("rewriter", after[holder]) in blobs
    assert len(blobs) <= 2  # that segment, and the tail's blob


# -- keeping segments in place ----------------------------------------------------------------


def test_a_restored_earlier_record_version_loads_its_segments_and_finishes_alike(aws):
    app, runtime, replies = started(aws, "restorer", rewrite=[40, 900], until=4)
    drain(runtime, "restorer", lambda i: one_turn(replies))
    assert app.client().status("restorer").status == Status.SUCCEEDED
    expected = app.client().result("restorer")

    versions = record_versions(runtime, "restorer")
    first = next(
        v for v, raw in versions.items() if (raw["status"], raw["generation"]) == ("suspended", 1)
    )
    old = segment_digests(versions[first])
    live = set(runtime.observer_store.list_keys("tasks/restorer/blobs/"))
    assert [d for d in old if blob_key("restorer", d) not in live], "no segment was superseded"

    store = runtime.observer_store
    store.put(record_key("restorer"), store.get(record_key("restorer"), version_id=first).body)
    app.client().resume("restorer")
    drain(runtime, "restorer", lambda i: one_turn(replies))

    status = app.client().status("restorer")
    assert status.status == Status.SUCCEEDED, status.error
    assert status.result == expected


def test_a_segment_gone_for_good_fails_the_load_naming_it(aws):
    app, runtime, _replies = started(aws, "lost")
    third = segment_digests(raw_record(runtime, "lost"))[2]
    destroy(runtime, blob_key("lost", third))

    with pytest.raises(BlobMissingError) as info:
        app.records.load("lost")
    assert blob_key("lost", third) in str(info.value)
    assert "segment 3 of" in str(info.value)


def test_the_finish_sweep_leaves_no_unreferenced_untagged_segment_and_tags_the_rest(aws):
    app, runtime, replies = started(aws, "sweeper", rewrite=[40], until=4)
    drain(runtime, "sweeper", lambda i: one_turn(replies))
    assert app.client().status("sweeper").status == Status.SUCCEEDED

    referenced = {blob_key("sweeper", d) for d in segment_digests(raw_record(runtime, "sweeper"))}
    live = runtime.observer_store.list_keys("tasks/sweeper/blobs/")
    name, _, value = FINISHED_TAG.partition("=")
    assert referenced <= set(live)
    assert all(tags_of(runtime, key).get(name) == value for key in referenced)
    assert sorted(set(live) - referenced) == []
