"""A recurring schedule's fire starts one run per scheduled time, skips while the previous run
has not finished (overlap="skip"), and refuses what it cannot trust or start, on both backends."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest

from continuum import Status
from tests.conftest import after_store_call, atomic_writes, record_key, sqs_event
from tests.schedules.conftest import KEY, build, fire_body, hour_ago
from tests.support import (
    BlobRunMarkers,
    FireDecision,
    LocalLambdaContext,
    decode_schedule_fire,
    utcnow,
)


class WorkerDied(BaseException):
    """The Lambda running the fire was killed: nothing after this point ran."""


@pytest.fixture
def s(aws):
    return build(aws)


def markers(s):
    return BlobRunMarkers(s.runtime.observer_store, prefix=s.app.records.prefix)


def run_id(at: datetime) -> str:
    return f"nightly-{at:%Y%m%dT%H%M%SZ}"


@contextmanager
def killed_after_put(s, key: str) -> Iterator[None]:
    """The fire's worker dies right after its write of ``key`` lands."""

    def die(put: str) -> None:
        if put == key:
            raise WorkerDied(key)

    with after_store_call(s.runtime, "put", die):
        yield


def test_a_fire_starts_one_run_named_after_the_schedule_and_its_scheduled_time(s):
    at = hour_ago()
    assert s.fire("nightly", at) == "schedule-started"
    task_id = f"nightly-{at:%Y%m%dT%H%M%SZ}"
    assert s.task_ids() == [task_id]
    s.finish(task_id)
    record = s.runtime.record(task_id)
    assert (record.task_name, record.status, record.result) == ("report", Status.SUCCEEDED, 1)
    runs, _ = markers(s).read("nightly")
    assert runs is not None
    assert (runs.run, runs.scheduled_time) == (task_id, at)


def test_a_duplicated_fire_starts_nothing_new(s):
    at = hour_ago()
    body = fire_body("nightly", at)
    assert s.deliver(body) == "schedule-started"
    assert s.deliver(body) == "duplicate"  # before the run ran: its start is sent again
    s.finish(s.task_ids()[0])
    assert s.deliver(body) == "duplicate"  # after it finished
    assert len(s.task_ids()) == 1
    assert s.runtime.record(s.task_ids()[0]).result == 1


def test_a_late_fire_starts_its_own_run_once(s):
    late, latest = hour_ago(3), hour_ago(1)
    assert s.fire("nightly", latest) == "schedule-started"
    s.finish(s.task_ids()[0])
    assert s.fire("nightly", late) == "schedule-started"  # its previous run has finished
    assert s.fire("nightly", late) == "duplicate"
    assert s.task_ids() == sorted(f"nightly-{t:%Y%m%dT%H%M%SZ}" for t in (late, latest))


def test_overlap_skip_starts_nothing_while_the_previous_run_has_not_finished(s, caplog):
    first, second, third = hour_ago(3), hour_ago(2), hour_ago(1)
    assert s.fire("nightly", first) == "schedule-started"
    with caplog.at_level(logging.WARNING):
        assert s.fire("nightly", second) == "schedule-skipped"
    first_id = f"nightly-{first:%Y%m%dT%H%M%SZ}"
    assert f"its previous run {first_id} has not finished" in caplog.text
    assert s.task_ids() == [first_id]
    runs, _ = markers(s).read("nightly")
    assert runs is not None
    assert runs.skipped is not None
    assert (runs.skipped.scheduled_time, runs.skipped.running, runs.skips) == (second, first_id, 1)
    s.finish(first_id)
    assert s.fire("nightly", second) == "schedule-skipped"  # delivered again: skipped still
    assert markers(s).read("nightly")[0].skips == 1
    assert s.fire("nightly", third) == "schedule-started"
    assert len(s.task_ids()) == 2


def test_a_skipped_time_stays_skipped_when_its_fire_comes_again_after_later_skips(s):
    ten, eleven, noon, one = hour_ago(4), hour_ago(3), hour_ago(2), hour_ago(1)
    assert s.fire("nightly", ten) == "schedule-started"
    assert [s.fire("nightly", t) for t in (eleven, noon, one)] == ["schedule-skipped"] * 3
    s.finish(s.task_ids()[0])
    # SQS delivers at least once: each skipped time's fire may come again, in any order.
    assert [s.fire("nightly", t) for t in (noon, eleven, one)] == ["schedule-skipped"] * 3
    assert s.task_ids() == [run_id(ten)]
    assert markers(s).read("nightly")[0].skips == 3


def test_a_fire_killed_right_after_deciding_to_skip_is_skipped_when_it_comes_again(s):
    ten, eleven, noon = hour_ago(3), hour_ago(2), hour_ago(1)
    assert s.fire("nightly", ten) == "schedule-started"
    with killed_after_put(s, markers(s).fire_key("nightly", eleven)), pytest.raises(WorkerDied):
        s.fire("nightly", eleven)
    assert s.fire("nightly", noon) == "schedule-skipped"  # a later skip noted meanwhile
    s.finish(run_id(ten))
    assert s.fire("nightly", eleven) == "schedule-skipped"
    assert s.task_ids() == [run_id(ten)]


@pytest.mark.parametrize("after", ["the schedule's object", "the fire's decision", "the record"])
def test_a_fire_killed_on_its_way_to_start_starts_its_run_once_when_it_comes_again(s, after):
    at = hour_ago()
    key = {
        "the schedule's object": markers(s).key("nightly"),
        "the fire's decision": markers(s).fire_key("nightly", at),
        "the record": record_key(run_id(at)),
    }[after]
    with killed_after_put(s, key), pytest.raises(WorkerDied):
        s.fire("nightly", at)
    assert s.fire("nightly", at) in ("schedule-started", "duplicate")
    assert s.fire("nightly", at) == "duplicate"
    assert s.task_ids() == [run_id(at)]
    s.finish(run_id(at))


def test_a_fire_whose_time_another_delivery_skipped_meanwhile_skips_and_holds_nothing_back(s):
    ten, eleven, noon = hour_ago(3), hour_ago(2), hour_ago(1)
    assert s.fire("nightly", ten) == "schedule-started"
    s.finish(run_id(ten))

    def skipped_meanwhile(key: str) -> None:  # as a delivery that saw the 10:00 run still running
        if key == markers(s).key("nightly"):
            skipped = FireDecision(
                scheduled_time=eleven, outcome="skipped", running=run_id(ten), at=utcnow()
            )
            markers(s).decide("nightly", skipped)

    with after_store_call(s.runtime, "get", skipped_meanwhile):
        assert s.fire("nightly", eleven) == "schedule-skipped"
    assert s.fire("nightly", eleven) == "schedule-skipped"
    assert s.fire("nightly", noon) == "schedule-started"  # the 11:00 time holds no run back
    assert s.task_ids() == [run_id(ten), run_id(noon)]


def test_overlap_allow_starts_a_run_at_every_fire(s):
    assert s.fire("often", hour_ago(2)) == "schedule-started"
    assert s.fire("often", hour_ago(1)) == "schedule-started"
    assert len(s.task_ids()) == 2
    assert all(s.runtime.record(t).status == Status.PENDING for t in s.task_ids())


def test_of_two_concurrent_fires_with_overlap_skip_one_starts_and_the_other_skips(s):
    bodies = [fire_body("nightly", hour_ago(2)), fire_body("nightly", hour_ago(1))]
    marker_key = markers(s).key("nightly")
    both_read = threading.Barrier(2, timeout=10)
    reads = []

    def meet(key: str) -> None:
        if key == marker_key and len(reads) < 2:  # each fire's first read of the object
            reads.append(key)
            both_read.wait()

    results: list[dict] = []

    def deliver(body: str) -> None:
        results.append(s.app.handler(sqs_event(body), LocalLambdaContext(30)))

    # moto answers a missing key without the after-call hook: make the object exist first.
    s.fire("nightly", hour_ago(5))
    s.finish(s.task_ids()[0])
    with atomic_writes(s.runtime), after_store_call(s.runtime, "get", meet):
        threads = [threading.Thread(target=deliver, args=(b,)) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [{"batchItemFailures": []}] * 2
    assert sorted(s.outcomes.seen[-2:]) == ["schedule-skipped", "schedule-started"]
    assert len(s.task_ids()) == 2  # the first run, and one of the two


def test_a_forged_or_unsigned_fire_is_refused_and_starts_nothing(s, caplog):
    at = hour_ago()
    signed = json.loads(fire_body("nightly", at))
    forged = fire_body("nightly", at, keys=("another-key",))
    unsigned = fire_body("nightly", at, keys=())
    renamed = json.dumps({**signed, "schedule": "often"}, separators=(",", ":"))
    with caplog.at_level(logging.ERROR):
        for body in (forged, unsigned, renamed):
            assert s.deliver(body) == "rejected"
    assert "not signed" in caplog.text
    assert "no signing key matches" in caplog.text
    assert s.task_ids() == []


def test_the_scheduled_time_is_not_signed_so_every_fire_of_one_body_verifies():
    body = fire_body("nightly", hour_ago(), keys=(KEY,))
    other = fire_body("nightly", hour_ago(7), keys=(KEY,))
    assert (
        decode_schedule_fire(body, keys=(KEY,)).sig == decode_schedule_fire(other, keys=(KEY,)).sig
    )


def test_a_fire_of_a_schedule_the_app_no_longer_declares_is_acknowledged(s, caplog):
    with caplog.at_level(logging.ERROR):
        assert s.fire("retired", hour_ago()) == "rejected"
    assert "schedule 'retired' fired, but this app no longer declares it" in caplog.text
    assert s.task_ids() == []


def test_a_fire_whose_task_the_app_does_not_know_is_acknowledged(s, caplog):
    s.app.schedule("orphan", "missing", every=timedelta(hours=1))
    with caplog.at_level(logging.ERROR):
        assert s.fire("orphan", hour_ago()) == "rejected"
    assert "schedule 'orphan' cannot start its run: unknown task 'missing'" in caplog.text
    assert s.task_ids() == []


def test_a_fire_for_a_time_to_come_or_no_time_is_refused(s, caplog):
    ahead = fire_body("nightly", utcnow() + timedelta(hours=1))
    garbled = fire_body("nightly", hour_ago()).replace('Z"', '"')
    with caplog.at_level(logging.ERROR):
        assert s.deliver(ahead) == "rejected"
        assert s.deliver(garbled) == "rejected"
    assert "which has not come" in caplog.text
    assert "which is not one" in caplog.text
    assert s.task_ids() == []


def test_a_fires_decision_is_tagged_for_the_lifecycle_rule_that_expires_finished_tasks(s):
    ten, eleven = hour_ago(2), hour_ago(1)
    assert s.fire("nightly", ten) == "schedule-started"
    assert s.fire("nightly", eleven) == "schedule-skipped"
    store = s.runtime.observer_store
    for at in (ten, eleven):
        assert store.tags(markers(s).fire_key("nightly", at)) == {"continuum-finished": "true"}
    assert store.tags(markers(s).key("nightly")) == {}  # the schedule's own object stays
