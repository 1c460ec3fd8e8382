"""The contract of the record-level seam (``Records``): what the worker, the client and the
operators rely on, whatever keeps the records.

The tests are the methods of :class:`RecordsContract`, through the ``Records`` protocol and
the ``RunMarkers`` it hands out only: no key, etag, tag or version appears in them. Records:
load (absent raises), create only if absent, swap by revision (a stale or absent one raises
and writes nothing), a create or swap retried after its reply was lost counts as landed, a
value over ``max_value_bytes`` is refused before anything is written, a large value reads back
by its digest. The inbox: a create-once put, an overwrite, a sorted listing, reads and deletes
of absent names. The history: each write kept, oldest first, each readable again. The sweep: a
finished swap is swept, a revived task is swept again, and a completed sweep is not redone.
The run markers: a schedule's runs written by compare-and-swap, a fire's decision made once.

:class:`TestBlobRecords` runs them on ``[memory]`` (``BlobRecords`` on the in-memory bucket)
and ``[moto]`` (``BlobRecords`` on moto's S3, versioned). To run them against a record backend
of your own, subclass :class:`RecordsContract` in a test module of yours (its name starting
with ``Test``) and give it the fixture ``records``: empty ``Records`` that keep history.
Return them, or yield them to clean up after each test; parametrize the fixture, or use
``request`` to reach other fixtures, as ``TestBlobRecords`` does. No ``import *``, no
redefinition: mypy checks the subclass as any override::

    import pytest

    from continuum._record.persistence import Records
    from tests.backends.test_records_contract import RecordsContract

    class TestMyRecords(RecordsContract):
        @pytest.fixture
        def records(self, request: pytest.FixtureRequest) -> Records:
            return MyRecords(...)

Where a write's reply can be lost (a network between the writer and the store), also give
the fixture ``lose_a_reply``: what makes the next write land and its reply be lost, so that
the writer retries it; without it those tests are skipped. A backend that sets
``max_value_bytes`` is checked against it; None skips that test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from continuum._record.blob_records import BlobRecords
from continuum._record.model import Status, TaskRecord
from continuum._record.persistence import Records
from continuum._record.schedule_runs import FireDecision, ScheduleRuns
from continuum.backends import InMemoryRecordStore, RecordStore, TransientStoreError
from continuum.errors import (
    BlobMissingError,
    PayloadTooLargeError,
    RecordConflictError,
    RecordExistsError,
    RecordNotFoundError,
)

REGION = "us-east-1"
#: A state larger than the default inline limit (32 KiB): kept outside the record itself.
LARGE_STATE = {"notes": ["n" * 1000 for _ in range(60)]}
#: The limit ``TestBlobRecords`` sets: above ``LARGE_STATE``, below ``TOO_LARGE_STATE``.
MAX_VALUE_BYTES = 200_000
TOO_LARGE_STATE = {"notes": ["n" * 1000 for _ in range(300)]}
#: Arms a lost reply: the next write lands and its reply is lost, so the writer retries it.
LoseAReply = Callable[[], None]
NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def new_record(task_id: str = "t-1", **fields: object) -> TaskRecord:
    return TaskRecord.model_validate({"task_id": task_id, "task_name": "crawl", **fields})


def write_three_turns(records: Records) -> None:
    revision = records.create(new_record(state={"turn": 0}))
    for turn in (1, 2):
        record, _ = records.load("t-1")
        record.turn, record.state = turn, {"turn": turn}
        revision = records.swap(record, revision=revision)


def finish(records: Records, task_id: str = "t-1") -> TaskRecord:
    revision = records.create(new_record(task_id, state=LARGE_STATE))
    record, _ = records.load(task_id)
    record.status, record.result = Status.SUCCEEDED, "done"
    records.swap(record, revision=revision, finished=True)
    return records.load(task_id)[0]


def runs(**fields: Any) -> ScheduleRuns:
    return ScheduleRuns.model_validate({"schedule": "nightly", "scheduled_time": NOON, **fields})


class RecordsContract:
    """The contract's tests; a subclass named ``Test...`` gives the fixture ``records`` (and,
    where replies can be lost, ``lose_a_reply``) and runs them (see the module's docstring)."""

    @pytest.fixture
    def records(self, request: pytest.FixtureRequest) -> Records | Iterator[Records]:
        """Empty records that keep their history (a subclass gives them, returned or, to
        clean up after the test, yielded)."""
        raise NotImplementedError(f"{type(self).__name__} gives no records fixture")

    @pytest.fixture
    def lose_a_reply(self, records: Records) -> LoseAReply | None:
        """What makes the next write land and its reply be lost; None: replies are not lost."""
        return None

    # -- records: load, create, swap ----------------------------------------------------------

    def test_loading_a_task_that_has_no_record_raises_not_found(self, records: Records) -> None:
        with pytest.raises(RecordNotFoundError):
            records.load("nobody")

    def test_a_created_record_loads_back_with_the_revision_the_create_returned(
        self,
        records: Records,
    ) -> None:
        revision = records.create(new_record(state={"n": 1}))
        loaded, loaded_revision = records.load("t-1")
        assert (loaded.task_name, loaded.state, loaded_revision) == ("crawl", {"n": 1}, revision)

    def test_a_second_create_of_one_task_id_raises_exists_and_keeps_the_first(
        self,
        records: Records,
    ) -> None:
        records.create(new_record(state={"n": 1}))
        with pytest.raises(RecordExistsError):
            records.create(new_record(state={"n": 2}))
        assert records.load("t-1")[0].state == {"n": 1}

    def test_a_swap_on_the_current_revision_lands_and_hands_out_a_new_revision(
        self,
        records: Records,
    ) -> None:
        first = records.create(new_record())
        record, _ = records.load("t-1")
        record.generation, record.status = 1, Status.SUSPENDED
        second = records.swap(record, revision=first)
        loaded, revision = records.load("t-1")
        assert (loaded.generation, loaded.status, revision) == (1, Status.SUSPENDED, second)
        assert second != first

    def test_a_swap_on_a_stale_revision_raises_conflict_and_writes_nothing(
        self, records: Records
    ) -> None:
        stale = records.create(new_record())
        record, _ = records.load("t-1")
        record.turn = 1
        records.swap(record, revision=stale)
        record.turn = 2
        with pytest.raises(RecordConflictError):
            records.swap(record, revision=stale)
        assert records.load("t-1")[0].turn == 1

    def test_a_swap_of_a_record_that_is_absent_raises_conflict(self, records: Records) -> None:
        revision = records.create(new_record("t-2"))
        with pytest.raises(RecordConflictError):
            records.swap(new_record("t-1"), revision=revision)
        with pytest.raises(RecordNotFoundError):
            records.load("t-1")

    def test_a_large_state_round_trips_whole(self, records: Records) -> None:
        records.create(new_record(state=LARGE_STATE))
        assert records.load("t-1")[0].state == LARGE_STATE

    def test_task_ids_lists_every_task_with_a_record_sorted(self, records: Records) -> None:
        for task_id in ("b", "a", "c"):
            records.create(new_record(task_id))
        records.inbox.put_cancel(
            "d", reason=None
        )  # an inbox alone: listed or not, it loads as none
        listed = records.task_ids()
        assert listed == sorted(listed)
        assert {"a", "b", "c"} <= set(listed) <= {"a", "b", "c", "d"}
        with pytest.raises(RecordNotFoundError):
            records.load("d")

    # -- the inbox --------------------------------------------------------------------------

    def test_an_inbox_create_takes_a_free_name_once_and_keeps_the_first_body(
        self,
        records: Records,
    ) -> None:
        assert records.inbox_put("t-1", "cancel.json", b"first", create=True)
        assert not records.inbox_put("t-1", "cancel.json", b"second", create=True)
        assert records.inbox_get("t-1", "cancel.json") == b"first"

    def test_an_inbox_overwrite_replaces_the_body(self, records: Records) -> None:
        assert records.inbox_put("t-1", "heartbeats/cb.json", b"one", create=False)
        assert records.inbox_put("t-1", "heartbeats/cb.json", b"two", create=False)
        assert records.inbox_get("t-1", "heartbeats/cb.json") == b"two"

    def test_the_inbox_lists_every_name_of_its_task_in_code_point_order(
        self, records: Records
    ) -> None:
        names = ["signals/go/2.json", "cancel.json", "signals/go/10.json", "callbacks/x.json"]
        for name in names:
            records.inbox_put("t-1", name, b"{}", create=True)
        records.inbox_put("t-10", "cancel.json", b"{}", create=True)  # another task's inbox
        assert records.inbox_list("t-1") == sorted(names)
        assert records.inbox_list("nobody") == []

    def test_an_absent_inbox_name_reads_as_none_and_deleting_it_does_nothing(
        self,
        records: Records,
    ) -> None:
        assert records.inbox_get("t-1", "cancel.json") is None
        records.inbox_delete("t-1", "cancel.json")
        records.inbox_put("t-1", "cancel.json", b"closed", create=True)
        records.inbox_delete("t-1", "cancel.json")
        assert (records.inbox_get("t-1", "cancel.json"), records.inbox_list("t-1")) == (None, [])
        assert records.inbox_put("t-1", "cancel.json", b"again", create=True)

    def test_a_cancel_request_after_the_finish_closed_the_inbox_is_refused(
        self,
        records: Records,
    ) -> None:
        assert records.inbox.close_to_cancel("t-1") is None
        assert not records.inbox.put_cancel("t-1", reason="too late")
        records.inbox.reopen_to_cancel("t-1")
        assert records.inbox.put_cancel("t-1", reason="taken again")
        assert records.inbox.close_to_cancel("t-1") is not None

    # -- the history ------------------------------------------------------------------------

    def test_the_history_keeps_each_write_oldest_first(self, records: Records) -> None:
        write_three_turns(records)
        past = records.history("t-1", most=10)
        assert [p.record.turn for p in past] == [0, 1, 2]
        assert [p.state for p in past] == [{"turn": 0}, {"turn": 1}, {"turn": 2}]
        assert [p.saved_at for p in past] == sorted(p.saved_at for p in past)

    def test_the_history_reads_the_latest_writes_up_to_most(self, records: Records) -> None:
        write_three_turns(records)
        assert [p.record.turn for p in records.history("t-1", most=2)] == [1, 2]

    def test_a_past_write_loads_again_by_its_version(self, records: Records) -> None:
        write_three_turns(records)
        first = records.history("t-1", most=10)[0]
        assert records.load_version("t-1", first.version).state == {"turn": 0}
        with pytest.raises(RecordNotFoundError):
            records.load_version("t-1", "no-such-version")

    def test_a_past_large_state_is_read_back_with_its_write(self, records: Records) -> None:
        revision = records.create(new_record(state=LARGE_STATE))
        record, _ = records.load("t-1")
        record.state = {"small": True}
        records.swap(record, revision=revision)
        past = records.history("t-1", most=10)
        assert [(p.state, p.state_missing) for p in past] == [
            (LARGE_STATE, False),
            ({"small": True}, False),
        ]

    def test_the_history_of_a_task_that_has_no_record_is_empty(self, records: Records) -> None:
        assert records.history("nobody", most=10) == []

    # -- the sweep --------------------------------------------------------------------------

    def test_a_finished_swap_is_swept_so_a_later_message_does_not_sweep_again(
        self,
        records: Records,
    ) -> None:
        done = finish(records)
        assert not records.ensure_swept(done)
        assert records.load("t-1")[0].state == LARGE_STATE  # the values it uses are kept

    def test_a_revived_task_is_swept_again_at_its_next_finish_check(self, records: Records) -> None:
        done = finish(records)
        records.revive("t-1", done.blob_refs())
        assert records.ensure_swept(done)
        assert not records.ensure_swept(done)
        assert records.load("t-1")[0].state == LARGE_STATE

    # -- lost replies, limits, large values ----------------------------------------------

    def test_a_create_retried_after_its_reply_was_lost_counts_as_landed(
        self, records: Records, lose_a_reply: LoseAReply | None
    ) -> None:
        if lose_a_reply is None:
            pytest.skip("this backend's replies cannot be lost")
        lose_a_reply()
        revision = records.create(new_record(state={"n": 1}))
        assert records.load("t-1") == (records.load("t-1")[0], revision)
        assert records.load("t-1")[0].state == {"n": 1}

    def test_a_swap_retried_after_its_reply_was_lost_counts_as_landed(
        self, records: Records, lose_a_reply: LoseAReply | None
    ) -> None:
        if lose_a_reply is None:
            pytest.skip("this backend's replies cannot be lost")
        first = records.create(new_record())
        record, _ = records.load("t-1")
        record.turn = 1
        lose_a_reply()
        second = records.swap(record, revision=first)
        loaded, revision = records.load("t-1")
        assert (loaded.turn, revision) == (1, second)

    def test_a_value_over_the_limit_is_refused_and_nothing_is_written(
        self, records: Records
    ) -> None:
        if records.max_value_bytes is None:
            pytest.skip("this backend sets no max_value_bytes")
        with pytest.raises(PayloadTooLargeError):
            records.create(new_record(state=TOO_LARGE_STATE))
        with pytest.raises(RecordNotFoundError):
            records.load("t-1")
        revision = records.create(new_record(state={"n": 1}))
        record, _ = records.load("t-1")
        record.state = TOO_LARGE_STATE
        with pytest.raises(PayloadTooLargeError):
            records.swap(record, revision=revision)
        assert records.load("t-1") == (records.load("t-1")[0], revision)
        assert records.load("t-1")[0].state == {"n": 1}

    def test_a_value_kept_outside_the_record_reads_back_by_its_digest(
        self, records: Records
    ) -> None:
        records.create(new_record(state=LARGE_STATE))
        record, _ = records.load("t-1")
        # where every value is kept inline there are no references to read
        for ref in record.blob_refs():
            assert records.large_value("t-1", ref.sha256) == LARGE_STATE

    def test_a_large_value_that_is_not_there_raises_blob_missing(self, records: Records) -> None:
        records.create(new_record(state=LARGE_STATE))
        with pytest.raises(BlobMissingError):
            records.large_value("t-1", "0" * 64)

    # -- the run markers -----------------------------------------------------------------

    def test_a_schedule_has_no_runs_before_its_first_write(self, records: Records) -> None:
        assert records.run_markers.read("nightly") == (None, None)

    def test_runs_are_created_once_and_then_swapped_by_revision(self, records: Records) -> None:
        markers = records.run_markers
        first = markers.write(runs(run="nightly-1"), revision=None)
        with pytest.raises(RecordConflictError):
            markers.write(runs(run="nightly-other"), revision=None)
        assert markers.read("nightly") == (runs(run="nightly-1"), first)
        second = markers.write(runs(run="nightly-2"), revision=first)
        assert second != first
        assert markers.read("nightly") == (runs(run="nightly-2"), second)

    def test_runs_written_on_a_stale_revision_raise_conflict_and_write_nothing(
        self, records: Records
    ) -> None:
        markers = records.run_markers
        stale = markers.write(runs(run="nightly-1"), revision=None)
        current = markers.write(runs(run="nightly-2"), revision=stale)
        with pytest.raises(RecordConflictError):
            markers.write(runs(run="nightly-3"), revision=stale)
        assert markers.read("nightly") == (runs(run="nightly-2"), current)
        assert markers.read("weekly") == (None, None)  # another schedule's runs are apart

    def test_runs_written_again_after_a_lost_reply_count_as_landed(
        self, records: Records, lose_a_reply: LoseAReply | None
    ) -> None:
        if lose_a_reply is None:
            pytest.skip("this backend's replies cannot be lost")
        markers = records.run_markers
        first = markers.write(runs(run="nightly-1"), revision=None)
        lose_a_reply()
        second = markers.write(runs(run="nightly-2"), revision=first)
        assert markers.read("nightly") == (runs(run="nightly-2"), second)

    def test_the_first_decision_of_a_fire_is_the_one_every_delivery_gets(
        self, records: Records
    ) -> None:
        markers = records.run_markers
        started = FireDecision(scheduled_time=NOON, outcome="started", at=NOON)
        skipped = FireDecision(scheduled_time=NOON, outcome="skipped", running="r", at=NOON)
        assert markers.decision("nightly", NOON) is None
        assert markers.decide("nightly", started) == (started, True)
        assert markers.decide("nightly", skipped) == (started, False)
        assert markers.decide("nightly", started) == (started, True)  # the same, retried
        assert markers.decision("nightly", NOON) == started
        assert markers.decision("weekly", NOON) is None


class ReplyLosingStore:
    """A blob store whose next put, once armed, lands and then answers as a lost reply would
    (a transient error, so that ``put_with_retries`` tries it again)."""

    def __init__(self, store: RecordStore) -> None:
        self.inner = store
        self.armed = False

    def arm(self) -> None:
        self.armed = True

    def put(self, key: str, body: bytes, **options: Any) -> str:
        etag = self.inner.put(key, body, **options)
        if self.armed:
            self.armed = False
            raise TransientStoreError("the reply was lost")
        return etag

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TestBlobRecords(RecordsContract):
    @pytest.fixture(params=["memory", "moto"])
    def records(self, request: pytest.FixtureRequest) -> Iterator[Records]:
        """``BlobRecords`` on the in-memory bucket, or on moto's S3 with versioning on."""
        if request.param == "memory":
            yield on_a_store(InMemoryRecordStore())
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
            yield on_a_store(S3RecordStore(s3, "records-contract"))

    @pytest.fixture
    def lose_a_reply(self, records: Records) -> LoseAReply | None:
        assert isinstance(records, BlobRecords)
        assert isinstance(records.store, ReplyLosingStore)
        return records.store.arm


def on_a_store(store: RecordStore) -> BlobRecords:
    losing = cast(RecordStore, ReplyLosingStore(store))  # the store's methods, by __getattr__
    return BlobRecords(losing, max_value_bytes=MAX_VALUE_BYTES)
