"""The contract of the record-level seam (``Records``): what the worker, the client and the
operators rely on, whatever keeps the records.

Each test runs on ``[memory]`` (``BlobRecords`` on the in-memory bucket) and ``[moto]``
(``BlobRecords`` on moto's S3, versioned), through the ``Records`` protocol only: no key, etag,
tag or version appears here. Records: load (absent raises), create only if absent, swap by
revision (a stale or absent one raises and writes nothing). The inbox: a create-once put, an
overwrite, a sorted listing, reads and deletes of absent names. The history: each write kept,
oldest first, each readable again. The sweep: a finished swap is swept, a revived task is
swept again, and a completed sweep is not redone.

To run it against a record backend of your own, import these tests into a test module of
yours and define the fixture ``records`` (an empty ``Records`` that keeps history)::

    import pytest
    from tests.backends.test_records_contract import *  # noqa: F403

    @pytest.fixture
    def records():
        return MyRecords(...)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from continuum._record.blob_records import BlobRecords
from continuum._record.model import Status, TaskRecord
from continuum._record.persistence import Records
from continuum.backends import InMemoryRecordStore
from continuum.errors import RecordConflictError, RecordExistsError, RecordNotFoundError

REGION = "us-east-1"
#: A state larger than the default inline limit (32 KiB): kept outside the record itself.
LARGE_STATE = {"notes": ["n" * 1000 for _ in range(60)]}


@pytest.fixture(params=["memory", "moto"])
def records(request: pytest.FixtureRequest) -> Iterator[Records]:
    """Empty records that keep their history."""
    if request.param == "memory":
        yield BlobRecords(InMemoryRecordStore())
        return
    import boto3
    from moto import mock_aws

    from continuum.backends import S3RecordStore

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="records-contract")
        s3.put_bucket_versioning(
            Bucket="records-contract", VersioningConfiguration={"Status": "Enabled"}
        )
        yield BlobRecords(S3RecordStore(s3, "records-contract"))


def new_record(task_id: str = "t-1", **fields: object) -> TaskRecord:
    return TaskRecord.model_validate({"task_id": task_id, "task_name": "crawl", **fields})


# -- records: load, create, swap ----------------------------------------------------------


def test_loading_a_task_that_has_no_record_raises_not_found(records: Records) -> None:
    with pytest.raises(RecordNotFoundError):
        records.load("nobody")


def test_a_created_record_loads_back_with_the_revision_the_create_returned(
    records: Records,
) -> None:
    revision = records.create(new_record(state={"n": 1}))
    loaded, loaded_revision = records.load("t-1")
    assert (loaded.task_name, loaded.state, loaded_revision) == ("crawl", {"n": 1}, revision)


def test_a_second_create_of_one_task_id_raises_exists_and_keeps_the_first(
    records: Records,
) -> None:
    records.create(new_record(state={"n": 1}))
    with pytest.raises(RecordExistsError):
        records.create(new_record(state={"n": 2}))
    assert records.load("t-1")[0].state == {"n": 1}


def test_a_swap_on_the_current_revision_lands_and_hands_out_a_new_revision(
    records: Records,
) -> None:
    first = records.create(new_record())
    record, _ = records.load("t-1")
    record.generation, record.status = 1, Status.SUSPENDED
    second = records.swap(record, revision=first)
    loaded, revision = records.load("t-1")
    assert (loaded.generation, loaded.status, revision) == (1, Status.SUSPENDED, second)
    assert second != first


def test_a_swap_on_a_stale_revision_raises_conflict_and_writes_nothing(records: Records) -> None:
    stale = records.create(new_record())
    record, _ = records.load("t-1")
    record.turn = 1
    records.swap(record, revision=stale)
    record.turn = 2
    with pytest.raises(RecordConflictError):
        records.swap(record, revision=stale)
    assert records.load("t-1")[0].turn == 1


def test_a_swap_of_a_record_that_is_absent_raises_conflict(records: Records) -> None:
    revision = records.create(new_record("t-2"))
    with pytest.raises(RecordConflictError):
        records.swap(new_record("t-1"), revision=revision)
    with pytest.raises(RecordNotFoundError):
        records.load("t-1")


def test_a_large_state_round_trips_whole(records: Records) -> None:
    records.create(new_record(state=LARGE_STATE))
    assert records.load("t-1")[0].state == LARGE_STATE


def test_task_ids_lists_every_task_with_a_record_sorted(records: Records) -> None:
    for task_id in ("b", "a", "c"):
        records.create(new_record(task_id))
    records.inbox.put_cancel("d", reason=None)  # an inbox alone: listed or not, it loads as none
    listed = records.task_ids()
    assert listed == sorted(listed)
    assert {"a", "b", "c"} <= set(listed) <= {"a", "b", "c", "d"}
    with pytest.raises(RecordNotFoundError):
        records.load("d")


# -- the inbox --------------------------------------------------------------------------


def test_an_inbox_create_takes_a_free_name_once_and_keeps_the_first_body(
    records: Records,
) -> None:
    assert records.inbox_put("t-1", "cancel.json", b"first", create=True)
    assert not records.inbox_put("t-1", "cancel.json", b"second", create=True)
    assert records.inbox_get("t-1", "cancel.json") == b"first"


def test_an_inbox_overwrite_replaces_the_body(records: Records) -> None:
    assert records.inbox_put("t-1", "heartbeats/cb.json", b"one", create=False)
    assert records.inbox_put("t-1", "heartbeats/cb.json", b"two", create=False)
    assert records.inbox_get("t-1", "heartbeats/cb.json") == b"two"


def test_the_inbox_lists_every_name_of_its_task_in_code_point_order(records: Records) -> None:
    names = ["signals/go/2.json", "cancel.json", "signals/go/10.json", "callbacks/x.json"]
    for name in names:
        records.inbox_put("t-1", name, b"{}", create=True)
    records.inbox_put("t-10", "cancel.json", b"{}", create=True)  # another task's inbox
    assert records.inbox_list("t-1") == sorted(names)
    assert records.inbox_list("nobody") == []


def test_an_absent_inbox_name_reads_as_none_and_deleting_it_does_nothing(
    records: Records,
) -> None:
    assert records.inbox_get("t-1", "cancel.json") is None
    records.inbox_delete("t-1", "cancel.json")
    records.inbox_put("t-1", "cancel.json", b"closed", create=True)
    records.inbox_delete("t-1", "cancel.json")
    assert (records.inbox_get("t-1", "cancel.json"), records.inbox_list("t-1")) == (None, [])
    assert records.inbox_put("t-1", "cancel.json", b"again", create=True)


def test_a_cancel_request_after_the_finish_closed_the_inbox_is_refused(
    records: Records,
) -> None:
    assert records.inbox.close_to_cancel("t-1") is None
    assert not records.inbox.put_cancel("t-1", reason="too late")
    records.inbox.reopen_to_cancel("t-1")
    assert records.inbox.put_cancel("t-1", reason="taken again")
    assert records.inbox.close_to_cancel("t-1") is not None


# -- the history ------------------------------------------------------------------------


def write_three_turns(records: Records) -> None:
    revision = records.create(new_record(state={"turn": 0}))
    for turn in (1, 2):
        record, _ = records.load("t-1")
        record.turn, record.state = turn, {"turn": turn}
        revision = records.swap(record, revision=revision)


def test_the_history_keeps_each_write_oldest_first(records: Records) -> None:
    write_three_turns(records)
    past = records.history("t-1", most=10)
    assert [p.record.turn for p in past] == [0, 1, 2]
    assert [p.state for p in past] == [{"turn": 0}, {"turn": 1}, {"turn": 2}]
    assert [p.saved_at for p in past] == sorted(p.saved_at for p in past)


def test_the_history_reads_the_latest_writes_up_to_most(records: Records) -> None:
    write_three_turns(records)
    assert [p.record.turn for p in records.history("t-1", most=2)] == [1, 2]


def test_a_past_write_loads_again_by_its_version(records: Records) -> None:
    write_three_turns(records)
    first = records.history("t-1", most=10)[0]
    assert records.load_version("t-1", first.version).state == {"turn": 0}
    with pytest.raises(RecordNotFoundError):
        records.load_version("t-1", "no-such-version")


def test_a_past_large_state_is_read_back_with_its_write(records: Records) -> None:
    revision = records.create(new_record(state=LARGE_STATE))
    record, _ = records.load("t-1")
    record.state = {"small": True}
    records.swap(record, revision=revision)
    past = records.history("t-1", most=10)
    assert [(p.state, p.state_missing) for p in past] == [
        (LARGE_STATE, False),
        ({"small": True}, False),
    ]


def test_the_history_of_a_task_that_has_no_record_is_empty(records: Records) -> None:
    assert records.history("nobody", most=10) == []


# -- the sweep --------------------------------------------------------------------------


def finish(records: Records, task_id: str = "t-1") -> TaskRecord:
    revision = records.create(new_record(task_id, state=LARGE_STATE))
    record, _ = records.load(task_id)
    record.status, record.result = Status.SUCCEEDED, "done"
    records.swap(record, revision=revision, finished=True)
    return records.load(task_id)[0]


def test_a_finished_swap_is_swept_so_a_later_message_does_not_sweep_again(
    records: Records,
) -> None:
    done = finish(records)
    assert not records.ensure_swept(done)
    assert records.load("t-1")[0].state == LARGE_STATE  # the values it uses are kept


def test_a_revived_task_is_swept_again_at_its_next_finish_check(records: Records) -> None:
    done = finish(records)
    records.revive("t-1", done.blob_refs())
    assert records.ensure_swept(done)
    assert not records.ensure_swept(done)
    assert records.load("t-1")[0].state == LARGE_STATE
