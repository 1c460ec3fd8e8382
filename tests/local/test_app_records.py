"""An app can be given its task records as a ``Records`` of another shape (``records=``), in
place of a blob store: its client, its worker and its operators then keep the tasks there."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, TaskContext
from continuum._local.lambda_emulation import LocalLambdaContext, event_record
from continuum._record.blob_records import BlobRecords, on_blobs
from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore
from tests.review.dict_records import DictRecords

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:continuations"


class Count(BaseModel):
    n: int = 0


def counting_app(**backends: object) -> Continuum:
    app = Continuum(**backends)  # type: ignore[arg-type]

    @app.task(state=Count)
    def count(ctx: TaskContext[Count]) -> int | None:
        ctx.state.n += 1
        return ctx.state.n if ctx.state.n >= 3 else None

    return app


def test_the_client_and_the_worker_of_an_app_given_records_keep_its_tasks_in_them() -> None:
    records, queue = DictRecords(), InMemoryContinuationQueue()
    app = counting_app(records=records, queue=queue)
    client = app.client()
    task_id = client.start("count", {})
    while messages := queue.receive(max_messages=1):
        result = app.handler(
            {"Records": [event_record(m, QUEUE_ARN) for m in messages]}, LocalLambdaContext(60)
        )
        assert not result.get("batchItemFailures")
        for message in messages:
            queue.delete(message.receipt_handle)
    record, _ = records.load(task_id)
    assert (record.status, record.result) == ("succeeded", 3)
    assert client.result(task_id) == 3


@pytest.mark.parametrize(
    "blobs",
    [{"store": InMemoryRecordStore()}, {"bucket": "b"}],
    ids=["store", "bucket"],
)
def test_records_and_a_blob_store_at_once_are_refused_naming_both(
    blobs: dict[str, object],
) -> None:
    (name,) = blobs
    with pytest.raises(ConfigurationError, match=f"records= and {name}="):
        Continuum(records=DictRecords(), **blobs)  # type: ignore[arg-type]


def test_records_that_are_not_records_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="records= is a Records"):
        Continuum(records=InMemoryRecordStore())  # type: ignore[arg-type]


def test_configure_with_a_store_replaces_the_records_given_and_records_replace_a_store() -> None:
    records = DictRecords()
    app = Continuum(records=records)
    app.configure(store=InMemoryRecordStore())
    assert isinstance(app.records, BlobRecords)
    app.configure(records=records)
    assert app.records is records
    assert app._backends.config.store is None


def test_what_needs_the_blob_store_under_the_records_says_so_for_other_records() -> None:
    with pytest.raises(ConfigurationError, match="the local runtime needs the task records"):
        on_blobs(DictRecords(), needs="the local runtime")
