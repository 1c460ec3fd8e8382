"""The contract a backend keeps: what continuum relies on from a ``RecordStore`` and a
``ContinuationQueue``, as S3 and SQS (and moto) show it.

Each test runs on ``[memory]`` (the in-memory twins) and ``[moto]`` (``S3RecordStore`` and
``SQSContinuationQueue`` on moto's S3 and SQS). The store: conditional writes (``If-None-Match``
refuses an existing key, ``If-Match`` a changed etag, with PreconditionFailed; a swap on a
missing key is NoSuchKey), what ``put_with_retries`` tries again (a transient error) and what
it does not (a lost condition), etags, deletes and versions, listing, tags. The queue: delays,
visibility, receive counts and receipt handles, receiving in batches, deletes.

To run it against your own backend, import these tests into a test module of yours and define
the fixtures ``store`` (an empty, versioned store) and ``queue`` (an empty queue whose
visibility timeout is at least 30 s); yours replace the ones below::

    import pytest
    from tests.backends.test_contract import *  # noqa: F403 (continuum's checkout on sys.path)

    @pytest.fixture
    def store():
        return MyRecordStore(...)

    @pytest.fixture
    def queue():
        return MyContinuationQueue(...)

``tests/functional/test_backends_agree.py`` does just that with the local runtime's views.
A backend that keeps a contract test's promise where moto does not: see ``on_moto``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Mapping

import pytest
from freezegun import freeze_time

from continuum.backends import (
    ContinuationQueue,
    InMemoryContinuationQueue,
    InMemoryRecordStore,
    NoSuchKey,
    PreconditionFailed,
    QueueError,
    RecordStore,
    StoredObject,
    TransientStoreError,
    put_with_retries,
)
from continuum.backends import store as store_module

REGION = "us-east-1"


@pytest.fixture(params=["memory", "moto"])
def store(request: pytest.FixtureRequest) -> Iterator[RecordStore]:
    """An empty store with versioning on."""
    if request.param == "memory":
        yield InMemoryRecordStore()
        return
    import boto3
    from moto import mock_aws

    from continuum.backends import S3RecordStore

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="contract")
        s3.put_bucket_versioning(Bucket="contract", VersioningConfiguration={"Status": "Enabled"})
        yield S3RecordStore(s3, "contract")


@pytest.fixture(params=["memory", "moto"])
def queue(request: pytest.FixtureRequest) -> Iterator[ContinuationQueue]:
    """An empty standard queue, its visibility timeout 30 s."""
    if request.param == "memory":
        yield InMemoryContinuationQueue()
        return
    import boto3
    from moto import mock_aws

    from continuum.backends import SQSContinuationQueue

    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="contract")["QueueUrl"]
        yield SQSContinuationQueue(sqs, url)


@pytest.fixture
def on_moto(request: pytest.FixtureRequest) -> bool:
    """Whether the store is moto's S3: a test of a known difference there must fail on it."""
    callspec = getattr(request.node, "callspec", None)
    return callspec is not None and callspec.params.get("store") == "moto"


def differs_on_moto(request: pytest.FixtureRequest, on_moto: bool, reason: str) -> None:
    """A known difference on moto: the test states S3's behaviour, which the twin has; on
    moto it must fail (strict), so that a fix there shows."""
    if on_moto:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


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


class Flaky:
    """A store whose next ``failures`` puts raise TransientStoreError; it counts the puts."""

    def __init__(self, store: RecordStore, failures: int) -> None:
        self.store = store
        self.failures = failures
        self.puts = 0

    def get(self, key: str, *, version_id: str | None = None) -> StoredObject:
        return self.store.get(key, version_id=version_id)

    def put(self, key: str, body: bytes, **conditions: object) -> str:
        self.puts += 1
        if self.failures:
            self.failures -= 1
            raise TransientStoreError(f"{key}: SlowDown")
        return self.store.put(key, body, **conditions)

    def tag(self, key: str, tags: Mapping[str, str]) -> None:
        self.store.tag(key, tags)


def test_a_transient_error_is_tried_again_and_a_lost_condition_is_not(store, monkeypatch):
    monkeypatch.setattr(store_module, "WRITE_BACKOFF_S", 0.0)
    flaky = Flaky(store, failures=2)
    etag = put_with_retries(flaky, "tasks/t/record.json", b"one", if_none_match=True)
    assert (flaky.puts, store.get("tasks/t/record.json").etag) == (3, etag)

    flaky.puts = 0
    with pytest.raises(PreconditionFailed):  # the 412 is an answer, not a fault
        put_with_retries(flaky, "tasks/t/record.json", b"two", if_none_match=True)
    assert flaky.puts == 1

    flaky.failures = store_module.WRITE_RETRIES + 1
    with pytest.raises(TransientStoreError):  # tried again only so often
        put_with_retries(flaky, "tasks/t/record.json", b"two", if_match=etag)
    assert store.get("tasks/t/record.json").body == b"one"


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


def test_versions_are_listed_newest_first(request, on_moto, store):
    differs_on_moto(
        request,
        on_moto,
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


def test_a_folder_whose_keys_are_all_deleted_is_not_listed(request, on_moto, store):
    differs_on_moto(
        request,
        on_moto,
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


def test_a_put_with_tags_reads_them_back(store):
    store.put("tasks/t/blobs/x.json.gz", b"{}", tags={"continuum": "blob"})
    assert store.tags("tasks/t/blobs/x.json.gz") == {"continuum": "blob"}


def test_reading_the_tags_of_a_missing_or_deleted_key_is_no_such_key(store):
    with pytest.raises(NoSuchKey):
        store.tags("tasks/t/record.json")
    store.put("tasks/t/record.json", b"{}")
    store.delete("tasks/t/record.json")
    with pytest.raises(NoSuchKey):
        store.tags("tasks/t/record.json")


# -- the queue: delays, visibility, receive counts, receipt handles --------------------------


def test_a_delayed_message_is_received_after_its_delay_not_before(queue):
    assert queue.max_delay_s >= 1
    queue.send("later", delay_s=1)
    assert queue.receive(max_messages=10) == []
    time.sleep(1.2)
    assert [m.body for m in queue.receive(max_messages=10)] == ["later"]


def test_a_received_message_hides_until_its_visibility_ends_and_returns_counted(queue):
    message_id = queue.send("continue")
    first = queue.receive(max_messages=10)
    assert [(m.body, m.message_id, m.receive_count) for m in first] == [("continue", message_id, 1)]
    assert queue.receive(max_messages=10) == []  # in flight

    queue.set_visibility(first[0].receipt_handle, 0)  # given back
    again = queue.receive(max_messages=10)

    assert [(m.message_id, m.receive_count) for m in again] == [(message_id, 2)]
    assert again[0].receipt_handle != first[0].receipt_handle


def test_a_message_whose_visibility_runs_out_comes_back_by_itself(queue):
    queue.send("continue")
    (first,) = queue.receive()
    queue.set_visibility(first.receipt_handle, 1)
    assert queue.receive(max_messages=10) == []
    time.sleep(1.2)
    assert [m.receive_count for m in queue.receive(max_messages=10)] == [2]


def test_a_batch_is_received_at_most_max_messages_at_a_time_each_message_once(queue):
    sent = {queue.send(f"m{i}") for i in range(3)}
    received: list[str] = []
    for _ in range(10):  # a standard queue may answer with fewer than it holds
        batch = queue.receive(max_messages=2)
        assert len(batch) <= 2
        received += [m.message_id for m in batch]
        if len(received) == len(sent):
            break
    assert sorted(received) == sorted(sent)
    assert queue.receive(max_messages=10) == []


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
