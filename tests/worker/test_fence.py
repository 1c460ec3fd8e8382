"""The fence, as a table: every status x generation x lease x message id x kind: one verdict.

The fence is a pure function of (record, message, message id, now), so the whole protocol's
first step is checked here without AWS: each row of the table below is one case of the
continuation message's step 1 (the fence) and the lease rule of step 2 (the claim).
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from continuum import Status
from tests.support import Continuation, Lease, TaskRecord, Verdict, fence, utcnow

NOW = utcnow()
RECORD_GENERATION = 3
#: The message id that suspended the record (``record.suspended_by``), and another one.
SUSPENDER, OTHER = "m-suspender", "m-other"

GENERATIONS = {"older": RECORD_GENERATION - 1, "current": RECORD_GENERATION, "newer": 4}
LEASES = ("none", "live-same-message", "live-other-message", "expired")
MESSAGE_IDS = (SUSPENDER, OTHER)
KINDS = ("continue", "timer", "wake")


def expected(status: Status, generation: str, lease: str, message_id: str, kind: str) -> Verdict:
    """The protocol, written out once more independently of ``fence.py``."""
    if status in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED):
        return Verdict.FINISHED
    if generation == "newer":
        return Verdict.FUTURE
    if generation == "older" and not (status == Status.RUNNING and lease == "live-same-message"):
        if status in (Status.SUSPENDED, Status.WAITING) and message_id == SUSPENDER:
            return Verdict.RESEND
        if status == Status.WAITING and kind == "wake":
            return Verdict.CHECK_INBOX
        return Verdict.STALE
    if status == Status.RUNNING and lease.startswith("live"):
        lease_message = message_id if lease == "live-same-message" else "m-holder"
        return Verdict.RETRY_LATER if lease_message == message_id else Verdict.DUPLICATE
    return Verdict.RUN


def record_for(status: Status, lease: str, message_id: str) -> TaskRecord:
    record = TaskRecord(
        task_id="t",
        task_name="job",
        status=status,
        generation=RECORD_GENERATION,
        suspended_by=SUSPENDER,
    )
    if lease != "none":
        expires = NOW + (timedelta(seconds=-1) if lease == "expired" else timedelta(minutes=5))
        holder = message_id if lease == "live-same-message" else "m-holder"
        record.lease = Lease(owner="worker", expires_at=expires, message_id=holder)
    return record


CASES = list(itertools.product(Status, GENERATIONS, LEASES, MESSAGE_IDS, KINDS))


def test_the_table_covers_every_combination():
    assert len(CASES) == len(Status) * 3 * 4 * 2 * 3 == 504


@pytest.mark.parametrize(("status", "generation", "lease", "message_id", "kind"), CASES)
def test_the_fence_gives_each_combination_its_verdict(status, generation, lease, message_id, kind):
    record = record_for(status, lease, message_id)
    message = Continuation(
        task_id="t", generation=GENERATIONS[generation], reason="test", sent_at=0.0, kind=kind
    )
    verdict = fence(record, message, message_id=message_id, now=NOW)
    assert verdict is expected(status, generation, lease, message_id, kind)


def test_only_a_live_lease_for_this_very_message_keeps_it_in_the_queue():
    assert [v for v in Verdict if not v.acknowledged] == [Verdict.RETRY_LATER]


def test_the_fence_reads_nothing_but_its_arguments():
    record = record_for(Status.SUSPENDED, "none", OTHER)
    before = record.model_dump_json()
    message = Continuation(task_id="t", generation=RECORD_GENERATION, reason="r", sent_at=0.0)
    assert fence(record, message, message_id=OTHER, now=NOW) is Verdict.RUN
    assert record.model_dump_json() == before  # a verdict changes nothing
