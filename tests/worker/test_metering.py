"""A metered store or queue counts each call where the bill counts it, and forwards the rest."""

from __future__ import annotations

from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore
from tests.support import Meter


def test_store_and_queue_calls_count_in_the_usage_of_the_message():
    meter = Meter()
    store, queue = meter.wrap(InMemoryRecordStore()), meter.wrap(InMemoryContinuationQueue())
    usage = meter.start()
    store.put("a", b"1")
    store.get("a")
    store.tags("a")  # GetObjectTagging: billed as a GET
    store.list_keys("")
    queue.send("m")
    queue.delete(queue.receive()[0].receipt_handle)  # the event source's: not the worker's
    assert (usage.s3_put, usage.s3_get, usage.s3_list) == (1, 2, 1)
    assert (usage.sqs_send, usage.s3_delete, usage.sqs_visibility) == (1, 0, 0)
    assert queue.max_delay_s == 900  # what is not counted is forwarded as it is


def test_a_method_replaced_on_the_fake_after_wrapping_is_the_one_called_and_counted():
    meter, fake = Meter(), InMemoryRecordStore()
    store = meter.wrap(fake)
    usage = meter.start()
    calls: list[str] = []
    real_put = fake.put

    def recording_put(key: str, body: bytes, **kwargs: object) -> str:
        calls.append(key)
        return real_put(key, body, **kwargs)  # type: ignore[arg-type]

    fake.put = recording_put  # type: ignore[method-assign]
    store.put("k", b"v")
    assert calls == ["k"]
    assert usage.s3_put == 1
