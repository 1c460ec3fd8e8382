"""The record and message codec: round trips, blobs, and what is refused."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from continuum import BadMessageError, InvalidTaskIdError, RecordCorruptError, Status
from tests.conftest import Blobs
from tests.support import (
    DEFAULT_SEGMENTING,
    Continuation,
    JournalEntry,
    Segmenting,
    TaskRecord,
    check_task_id,
    decode_message,
    decode_record,
    dump_json,
    encode_message,
    encode_record,
)


def test_small_record_round_trips_inline_and_reads_as_json():
    record = TaskRecord(task_id="t1", task_name="research", state={"topic": "tides"})
    record.journal.append(JournalEntry(key="search#0", name="search", result=["a", "b"]))
    blobs = Blobs()
    data = encode_record(record, put_blob=blobs.put)
    assert blobs == {}
    readable = json.loads(data)
    assert readable["status"] == "pending"
    assert readable["state"] == {"topic": "tides"}
    assert readable["journal"][0]["key"] == "search#0"
    assert decode_record(data, task_id="t1", get_blob=blobs.get) == record


def test_state_over_the_inline_limit_goes_to_a_compressed_verified_blob():
    big = {"notes": [f"note {i} " * 20 for i in range(2000)]}
    record = TaskRecord(task_id="t1", task_name="research", state=big, result=None)
    record.journal.append(JournalEntry(key="fetch#0", name="fetch", result="x" * 50_000))
    blobs = Blobs()
    data = encode_record(record, put_blob=blobs.put, inline_limit=1024, segmenting=None)

    stored = json.loads(data)
    assert stored["state"] is None
    assert stored["state_ref"]["size"] > stored["state_ref"]["stored"]  # compressed
    assert stored["journal"][0]["result_ref"] is not None
    assert len(blobs) == 2
    assert len(data) < 4096
    assert record.state is big  # the in-memory record keeps its values

    restored = decode_record(data, task_id="t1", get_blob=blobs.get)
    assert restored.state == big
    assert restored.journal[0].result == "x" * 50_000

    # A blob whose content does not match its name is refused.
    digest = stored["state_ref"]["sha256"]
    blobs[digest] = gzip.compress(b'{"notes": []}')
    with pytest.raises(RecordCorruptError, match="does not match its digest"):
        decode_record(data, task_id="t1", get_blob=blobs.get)


@pytest.mark.parametrize(
    "data",
    [b'{"task_id": "t1", "task_name": "x", "sta', b"", b"[]", b'{"task_id": "t1"}'],
    ids=["truncated", "empty", "not-an-object", "missing-fields"],
)
def test_a_record_that_does_not_parse_is_corrupt_not_retried(data):
    with pytest.raises(RecordCorruptError, match="record does not parse") as info:
        decode_record(data, task_id="t1", get_blob=Blobs().get)
    assert info.value.task_id == "t1"


def test_a_record_stored_under_another_id_is_corrupt():
    data = TaskRecord(task_id="other", task_name="x").model_dump_json().encode()
    with pytest.raises(RecordCorruptError, match="stored under 't1'"):
        decode_record(data, task_id="t1", get_blob=Blobs().get)


@pytest.mark.parametrize("task_id", ["research-1", "a", "A.b_c-9", "x" * 128])
def test_safe_task_ids_are_accepted(task_id):
    assert check_task_id(task_id) == task_id


@pytest.mark.parametrize(
    "task_id",
    ["../x", "/etc/passwd", "a/b", "", "-leading", "tab\there", "nul\x00", "x" * 129, "é", 7],
)
def test_unsafe_task_ids_are_refused(task_id):
    with pytest.raises(InvalidTaskIdError):
        check_task_id(task_id)


def test_message_round_trip():
    message = Continuation(task_id="t1", generation=4, reason="budget", sent_at=1.5)
    assert decode_message(encode_message(message)) == message


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("not json", "not a continuation"),
        ('{"hello": "world"}', "task_id"),
        ('{"v":1,"task_id":"t","generation":-1,"reason":"r","sent_at":0}', "generation"),
        ("x" * 10_000, "bytes"),
    ],
    ids=["not-json", "not-a-continuation", "negative-generation", "oversized"],
)
def test_bad_messages_are_refused_with_the_reason(body, problem):
    with pytest.raises(BadMessageError, match=problem):
        decode_message(body)


def test_message_with_an_unsafe_task_id_is_refused():
    body = '{"v":1,"task_id":"../../x","generation":0,"reason":"r","sent_at":0}'
    with pytest.raises(InvalidTaskIdError):
        decode_message(body)


def test_status_knows_which_states_are_final():
    assert {s for s in Status if s.finished} == {Status.SUCCEEDED, Status.FAILED, Status.CANCELLED}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None)
@given(
    state=json_values | st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    results=st.lists(json_values, max_size=4),
    limit=st.sampled_from([0, 16, 256, 1 << 20]),
    segmenting=st.sampled_from(
        [
            None,
            Segmenting(min_bytes=0, spread_bytes=1, max_bytes=1),  # every item a segment
            Segmenting(min_bytes=8, spread_bytes=16, max_bytes=64),
            Segmenting(min_bytes=64, spread_bytes=256, max_bytes=1024),
            DEFAULT_SEGMENTING,
        ]
    ),
)
def test_any_json_state_and_results_round_trip_at_any_inline_limit_and_segmenting(
    state, results, limit, segmenting
):
    record = TaskRecord(task_id="t1", task_name="x", state=state)
    record.journal = [JournalEntry(key=f"s#{i}", name="s", result=r) for i, r in enumerate(results)]
    blobs = Blobs()
    data = encode_record(record, put_blob=blobs.put, inline_limit=limit, segmenting=segmenting)
    restored = decode_record(data, task_id="t1", get_blob=blobs.get)
    assert dump_json(restored.state) == dump_json(state)  # the same JSON: 1 is not 1.0 nor true
    assert [e.result for e in restored.journal] == results
