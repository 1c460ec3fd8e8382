"""Segments: where a state's large lists are cut, and the record that points at them.

A checkpoint uploads what changed since the last one, so the cut must be stable
under appends and local under edits, and the record must stay readable and unambiguous.
"""

from __future__ import annotations

import gzip
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from continuum import BlobMissingError, ConfigurationError, RecordCorruptError
from continuum.testing import InMemoryRecordStore
from tests.conftest import Blobs
from tests.support import (
    DEFAULT_SEGMENTING,
    BlobRecords,
    Segmenting,
    TaskRecord,
    cut_state,
    decode_record,
    dump_json,
    encode_record,
    segment_ends,
)

#: Thresholds small enough that a list of a few short items is cut.
TINY = Segmenting(min_bytes=8, spread_bytes=16, max_bytes=64)
#: Turns of a long conversation: about 600 KB of JSON, seven segments at the default thresholds.
LONG = 1500


def chat(turns: int, words: int = 40) -> dict:
    """An agent state: messages whose content is a list of blocks, as model APIs write them."""
    messages = []
    for i in range(turns):
        text = " ".join(f"word{(i * 7 + j) % 97}" for j in range(words))
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}"}]}
        )
    return {"topic": "tides", "messages": messages}


def sealed(items: list, how: Segmenting = TINY) -> list[bytes]:
    """The sealed segments of a list: the JSON of each."""
    _skeleton, cuts, _size = cut_state(items, how)
    return cuts[0].segments if cuts else []


# -- where lists are cut ----------------------------------------------------------------------

items_strategy = st.lists(st.text(max_size=30) | st.integers(), max_size=60)


@settings(max_examples=200, deadline=None)
@given(items=items_strategy, more=items_strategy)
def test_appending_items_leaves_every_sealed_segment_as_it_was(items, more):
    before = sealed(items)
    assert sealed(items + more)[: len(before)] == before


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.text(max_size=300), max_size=80))
def test_a_segment_ends_by_max_bytes_unless_its_last_item_alone_is_larger(items):
    dumped = [dump_json(item) for item in items]
    start = 0
    for end in segment_ends(dumped, TINY):
        run = dumped[start:end]
        assert sum(len(item) + 1 for item in run[:-1]) < TINY.max_bytes
        start = end


def test_editing_an_early_item_changes_only_the_segment_that_holds_it():
    state = chat(LONG)
    _sk, [before], _size = cut_state(state, DEFAULT_SEGMENTING)
    holder = before.counts[0] + before.counts[1] // 2  # in the middle of the second segment
    holder -= holder % 2  # an assistant message: its text
    text = state["messages"][holder]["content"][0]["text"]
    state["messages"][holder]["content"][0]["text"] = text.replace("word", "WORD")

    _sk, [after], _size = cut_state(state, DEFAULT_SEGMENTING)
    assert after.counts == before.counts
    changed = [i for i, (a, b) in enumerate(zip(before.segments, after.segments)) if a != b]
    assert changed == [1]


def test_the_skeleton_keeps_the_tail_where_the_list_was_and_the_value_is_untouched():
    state = chat(LONG)
    original = json.loads(json.dumps(state))
    skeleton, [cut], size = cut_state(state, DEFAULT_SEGMENTING)

    assert state == original
    assert size == len(dump_json(state))
    assert cut.path == ("messages",)
    assert skeleton["topic"] == "tides"
    sealed_items = [item for segment in cut.segments for item in json.loads(segment)]
    assert sealed_items + skeleton["messages"] == state["messages"]
    assert len(dump_json(skeleton["messages"])) < DEFAULT_SEGMENTING.max_bytes


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(), inner, max_size=5),
        max_leaves=60,
    )
)
def test_the_walk_adds_up_the_exact_size_of_the_json(value):
    assert cut_state(value, TINY)[2] == len(dump_json(value))


@pytest.mark.parametrize(("minimum", "spread", "maximum"), [(-1, 1, 10), (10, 1, 5), (0, 0, 10)])
def test_impossible_thresholds_are_refused(minimum, spread, maximum):
    with pytest.raises(ConfigurationError, match="segmenting needs"):
        Segmenting(min_bytes=minimum, spread_bytes=spread, max_bytes=maximum)


# -- the stored record ------------------------------------------------------------------------


def test_a_segmented_state_reads_as_its_tail_and_a_manifest_beside_it():
    record = TaskRecord(task_id="t1", task_name="chat", state=chat(LONG))
    blobs = Blobs()
    # An inline limit the tail (at most max_bytes) fits in, the whole state not.
    limit = DEFAULT_SEGMENTING.max_bytes
    stored = json.loads(encode_record(record, put_blob=blobs.put, inline_limit=limit))

    assert stored["format"] == 4  # a worker that does not know segments leaves it alone
    [listed] = stored["state_segments"]
    assert listed["path"] == ["messages"]
    assert len(listed["segments"]) == len(blobs) > 5
    assert (
        sum(s["items"] for s in listed["segments"]) + len(stored["state"]["messages"]) == 2 * LONG
    )
    assert stored["state"]["messages"][-1] == record.state["messages"][-1]  # the latest, inline
    assert stored["state_ref"] is None
    restored = decode_record(json.dumps(stored).encode(), task_id="t1", get_blob=blobs.get)
    assert restored.state == record.state


def test_a_small_state_is_stored_as_before_and_a_record_without_segments_keeps_its_format():
    record = TaskRecord(task_id="t1", task_name="chat", state=chat(2))
    stored = json.loads(encode_record(record, put_blob=Blobs().put))
    assert stored["format"] == 2
    assert stored["state"] == record.state
    assert stored["state_segments"] == []


def test_user_data_that_looks_like_a_manifest_is_only_data():
    state = {"state_segments": [{"path": ["x"], "segments": []}], "$segments": ["a"], "x": [1]}
    record = TaskRecord(task_id="t1", task_name="chat", state=state)
    blobs = Blobs()
    data = encode_record(record, put_blob=blobs.put, inline_limit=0, segmenting=TINY)
    assert decode_record(data, task_id="t1", get_blob=blobs.get).state == state


def test_a_segment_that_does_not_match_its_digest_or_its_count_is_refused():
    record = TaskRecord(task_id="t1", task_name="chat", state=chat(LONG))
    blobs = Blobs()
    data = encode_record(record, put_blob=blobs.put)
    first = json.loads(data)["state_segments"][0]["segments"][0]

    blobs[first["sha256"]] = gzip.compress(b"[]")
    with pytest.raises(RecordCorruptError, match="does not match its digest"):
        decode_record(data, task_id="t1", get_blob=blobs.get)

    stored = json.loads(data)
    stored["state_segments"][0]["segments"][0]["items"] += 1
    blobs.put(first["sha256"], dump_json(chat(LONG)["messages"][: first["items"]]))
    with pytest.raises(RecordCorruptError, match="does not hold the"):
        decode_record(json.dumps(stored).encode(), task_id="t1", get_blob=blobs.get)

    stored["state_segments"][0]["segments"][0]["items"] -= 1
    stored["state_segments"][0]["path"] = ["nowhere"]
    with pytest.raises(RecordCorruptError, match="nowhere"):
        decode_record(json.dumps(stored).encode(), task_id="t1", get_blob=blobs.get)


# -- loading: one GET for the record, then the segments in parallel ---------------------------


class CountingStore(InMemoryRecordStore):
    """The in-memory store, counting GETs, and holding the first ``together`` GETs of blobs
    until all of them are in flight at once (a sequential reader times out)."""

    def __init__(self, together: int) -> None:
        super().__init__()
        self.gets: list[str] = []
        self.barrier = threading.Barrier(together, timeout=5)
        self.held = 0
        self.armed = False

    def get(self, key, *, version_id=None):
        self.gets.append(key)
        if self.armed and "/blobs/" in key and self.held < self.barrier.parties:
            self.held += 1
            self.barrier.wait()
        return super().get(key, version_id=version_id)


def test_loading_gets_the_record_once_and_its_segments_in_parallel():
    store = CountingStore(together=4)
    records = BlobRecords(store)
    records.create(TaskRecord(task_id="t1", task_name="chat", state=chat(LONG)))
    store.armed, store.gets = True, []

    fresh = BlobRecords(store)
    record, _etag = fresh.load("t1")

    assert record.state == chat(LONG)
    assert len(record.state_segments[0].segments) > 5
    assert store.gets[0] == "tasks/t1/record.json"
    assert sorted(store.gets[1:]) == sorted(  # the segments, and the tail's blob if any
        f"tasks/t1/blobs/{ref.sha256}.json.gz" for ref in record.blob_refs()
    )


def test_a_segment_gone_for_good_fails_the_load_naming_it(monkeypatch):
    store = InMemoryRecordStore()
    records = BlobRecords(store)
    records.create(TaskRecord(task_id="t1", task_name="chat", state=chat(LONG)))
    stored = json.loads(store.get("tasks/t1/record.json").body)
    third = stored["state_segments"][0]["segments"][2]["sha256"]
    store.delete(f"tasks/t1/blobs/{third}.json.gz")
    monkeypatch.setattr(store, "versions", lambda key: [])  # an unversioned bucket

    with pytest.raises(BlobMissingError) as info:
        BlobRecords(store).load("t1")
    assert f"blobs/{third}.json.gz" in str(info.value)
    assert "segment 3 of " in str(info.value)
    assert "of the list at messages" in str(info.value)
