"""The store and the queue answer alike on both backends: what the protocol relies on from S3
and SQS, as moto shows it, holds for continuum.testing's fakes too.

Each test runs on ``[memory]`` and ``[moto]`` through the runtime's own views (the observer's
store and the event source's queue), the very objects the other tests look through.
"""

from __future__ import annotations

import hashlib

import pytest
from freezegun import freeze_time

from continuum import Continuum
from tests.support import LocalRuntime, NoSuchKey, PreconditionFailed, QueueError


def differs_on_moto(request: pytest.FixtureRequest, runtime: LocalRuntime, reason: str) -> None:
    """A known difference on moto: the test states S3's behaviour, which the fake has; on moto
    it must fail (strict), so that a fix there shows."""
    if runtime.backend == "moto":
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.fixture
def runtime(aws):
    return LocalRuntime(Continuum(), budget_s=900, backend=aws)


@pytest.fixture
def store(runtime):
    return runtime.observer_store


@pytest.fixture
def queue(runtime):
    return runtime.source


# -- the store: conditional writes ---------------------------------------------------------


def test_a_create_refuses_an_existing_key_and_a_swap_refuses_a_changed_etag(store):
    etag = store.put("tasks/t/record.json", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("tasks/t/record.json", b"two", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("tasks/t/record.json", b"two", if_match='"0123456789abcdef0123456789abcdef"')
    assert store.get("tasks/t/record.json").body == b"one"

    newer = store.put("tasks/t/record.json", b"two", if_match=etag)

    assert store.get("tasks/t/record.json").etag == newer != etag
    with pytest.raises(PreconditionFailed):  # the old etag lost with the swap
        store.put("tasks/t/record.json", b"three", if_match=etag)


def test_a_swap_on_a_missing_or_deleted_key_is_no_such_key(store):
    etag = store.put("tasks/t/record.json", b"one")
    with pytest.raises(NoSuchKey):
        store.put("tasks/other/record.json", b"two", if_match=etag)
    store.delete("tasks/t/record.json")
    with pytest.raises(NoSuchKey):
        store.put("tasks/t/record.json", b"two", if_match=etag)


def test_the_etag_is_the_quoted_md5_of_the_body(store):
    etag = store.put("tasks/t/blobs/x.json.gz", b"payload", content_encoding="gzip")
    assert etag == f'"{hashlib.md5(b"payload").hexdigest()}"'
    assert store.get("tasks/t/blobs/x.json.gz").etag == etag


# -- the store: deletes, versions, listing, tags ---------------------------------------------


def test_a_deleted_key_reads_as_missing_keeps_its_versions_and_can_be_created_again(store):
    store.put("tasks/t/record.json", b"one")
    store.put("tasks/t/record.json", b"two")
    store.delete("tasks/t/record.json")

    with pytest.raises(NoSuchKey):
        store.get("tasks/t/record.json")
    versions = store.versions("tasks/t/record.json")
    bodies = sorted(
        store.get("tasks/t/record.json", version_id=v.version_id).body
        for v in versions
        if not v.is_delete_marker
    )
    assert bodies == [b"one", b"two"]
    assert [v.is_latest for v in versions if v.is_delete_marker] == [True]
    store.put("tasks/t/record.json", b"three", if_none_match=True)
    assert store.get("tasks/t/record.json").body == b"three"


def test_versions_are_listed_newest_first(request, runtime, store):
    differs_on_moto(
        request,
        runtime,
        "moto marks the newest version IsLatest even when a newer delete marker hides it; S3 "
        "marks the delete marker (S3RecordStore puts the one marked latest first, then the "
        "rest by time)",
    )
    with freeze_time("2030-01-01 12:00:00.250"):  # within one second, wherever the test runs
        store.put("tasks/t/record.json", b"one")
        store.put("tasks/t/record.json", b"two")
        store.delete("tasks/t/record.json")

    versions = store.versions("tasks/t/record.json")

    assert [v.is_delete_marker for v in versions] == [True, False, False]
    assert store.get("tasks/t/record.json", version_id=versions[1].version_id).body == b"two"


def test_listing_gives_the_live_keys_under_a_prefix_and_folders_with_a_delimiter(store):
    for key in ("tasks/a/record.json", "tasks/a/blobs/1.json.gz", "tasks/b/record.json", "x"):
        store.put(key, b"{}")
    store.delete("tasks/b/record.json")

    assert store.list_keys("tasks/") == ["tasks/a/blobs/1.json.gz", "tasks/a/record.json"]
    assert store.list_keys("tasks/a/", delimiter="/") == ["tasks/a/record.json", "tasks/a/blobs/"]
    assert store.list_keys("nothing/") == []


def test_a_folder_whose_keys_are_all_deleted_is_not_listed(request, runtime, store):
    differs_on_moto(
        request,
        runtime,
        "moto lists a common prefix whose keys all end in a delete marker; S3 lists only "
        "the prefixes of current objects",
    )
    store.put("tasks/a/record.json", b"{}")
    store.put("tasks/b/record.json", b"{}")
    store.delete("tasks/b/record.json")

    assert store.list_keys("tasks/", delimiter="/") == ["tasks/a/"]


def test_tagging_a_missing_key_is_no_such_key(store):
    with pytest.raises(NoSuchKey):
        store.tag("tasks/t/record.json", {"continuum": "finished"})


def test_tagging_a_deleted_key_is_no_such_key(store):
    store.put("tasks/t/record.json", b"{}")
    store.delete("tasks/t/record.json")
    with pytest.raises(NoSuchKey):
        store.tag("tasks/t/record.json", {"continuum": "finished"})


def test_tags_read_back_the_current_versions_tags_and_a_new_version_has_none(store):
    store.put("tasks/t/record.json", b"one")
    assert store.tags("tasks/t/record.json") == {}

    store.tag("tasks/t/record.json", {"continuum-finished": "true"})
    assert store.tags("tasks/t/record.json") == {"continuum-finished": "true"}

    store.put("tasks/t/record.json", b"two")  # tags belong to a version: the new one has none
    assert store.tags("tasks/t/record.json") == {}


def test_reading_the_tags_of_a_missing_or_deleted_key_is_no_such_key(store):
    with pytest.raises(NoSuchKey):
        store.tags("tasks/t/record.json")
    store.put("tasks/t/record.json", b"{}")
    store.delete("tasks/t/record.json")
    with pytest.raises(NoSuchKey):
        store.tags("tasks/t/record.json")


# -- the queue: delays, visibility, receive counts, receipt handles --------------------------


def test_a_delayed_message_is_not_received_before_its_delay(queue):
    queue.send("later", delay_s=60)
    assert queue.receive(max_messages=10) == []


def test_a_received_message_hides_until_its_visibility_ends_and_returns_counted(queue):
    message_id = queue.send("continue")
    first = queue.receive(max_messages=10)
    assert [(m.body, m.message_id, m.receive_count) for m in first] == [("continue", message_id, 1)]
    assert queue.receive(max_messages=10) == []  # in flight

    queue.set_visibility(first[0].receipt_handle, 0)  # given back
    again = queue.receive(max_messages=10)

    assert [(m.message_id, m.receive_count) for m in again] == [(message_id, 2)]
    assert again[0].receipt_handle != first[0].receipt_handle


def test_a_deleted_message_never_comes_back_and_deleting_it_again_is_harmless(queue):
    queue.send("done")
    (message,) = queue.receive()
    queue.delete(message.receipt_handle)
    queue.delete(message.receipt_handle)
    with pytest.raises(QueueError, match="ReceiptHandleIsInvalid"):
        queue.set_visibility(message.receipt_handle, 0)
    assert queue.receive(max_messages=10) == []


def test_a_receipt_handle_the_queue_never_gave_is_refused(queue):
    queue.send("real")
    with pytest.raises(QueueError, match="ReceiptHandleIsInvalid"):
        queue.set_visibility("MessageReceiptHandle", 0)
    with pytest.raises(QueueError, match="ReceiptHandleIsInvalid"):
        queue.delete("MessageReceiptHandle")
    assert [m.body for m in queue.receive()] == ["real"]
