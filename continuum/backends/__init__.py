"""Where records and continuations live, and the door a backend comes in by.

A third-party backend implements :class:`RecordStore` (bytes under keys, with S3's
conditional writes) and :class:`ContinuationQueue` (an SQS standard queue) with the types
exported here, and passes the contract suite (``tests/backends/test_contract.py``). The
record-level seam above the store (``Records``, in ``continuum._record.persistence``: load,
create, swap, inbox, history, sweep) then works on it unchanged; its own contract suite
(``tests/backends/test_records_contract.py``: subclass its ``RecordsContract``) is what a
record backend not shaped like S3 would pass, and ``Continuum(records=...)`` takes it. Here
too: the S3 and SQS implementations (:class:`S3RecordStore`, :class:`SQSContinuationQueue`)
and ``memory``, the in-memory twins on an injectable clock (also exported by
``continuum.testing``). The scheduler seam (:class:`ContinuationScheduler`: one-time and
recurring schedules that send continuations, on EventBridge Scheduler or in memory, with a
contract suite of its own in ``tests/backends/test_scheduler_contract.py``) is here too: a
wait longer than one delayed message, and recurring schedules, use it.

Example:
    >>> from continuum.backends import PreconditionFailed, RecordStore, StoredObject
    >>> class MyStore:  # implements RecordStore  # doctest: +SKIP
    ...     def get(self, key, *, version_id=None) -> StoredObject: ...

May import: errors, _base.
"""

from typing import TYPE_CHECKING, Any

from continuum.backends.queue import ContinuationQueue, QueueError, QueueMessage
from continuum.backends.store import (
    NoSuchKey,
    ObjectVersion,
    PreconditionFailed,
    RecordStore,
    StoredObject,
    StoreError,
    TransientStoreError,
    put_with_retries,
)

__all__ = [
    "ContinuationQueue",
    "ContinuationScheduler",
    "EventBridgeScheduler",
    "Fire",
    "InMemoryContinuationQueue",
    "InMemoryRecordStore",
    "InMemoryScheduler",
    "InvalidSchedule",
    "ManualClock",
    "NoSuchKey",
    "ObjectVersion",
    "PreconditionFailed",
    "QueueError",
    "QueueMessage",
    "RecordStore",
    "S3RecordStore",
    "SQSContinuationQueue",
    "Schedule",
    "ScheduleConflict",
    "ScheduleFirer",
    "ScheduleNotFound",
    "ScheduleState",
    "SchedulerError",
    "StoreError",
    "StoredObject",
    "TransientSchedulerError",
    "TransientStoreError",
    "parse_scheduled_time",
    "put_with_retries",
    "recurring_expression",
    "wait_schedule_name",
]

if TYPE_CHECKING:
    from continuum.backends.eventbridge import EventBridgeScheduler
    from continuum.backends.memory import (
        InMemoryContinuationQueue,
        InMemoryRecordStore,
        ManualClock,
    )
    from continuum.backends.memory.scheduler import InMemoryScheduler, ScheduleFirer
    from continuum.backends.recurrence import recurring_expression
    from continuum.backends.s3 import S3RecordStore
    from continuum.backends.scheduler import (
        ContinuationScheduler,
        Fire,
        InvalidSchedule,
        Schedule,
        ScheduleConflict,
        ScheduleNotFound,
        SchedulerError,
        ScheduleState,
        TransientSchedulerError,
        parse_scheduled_time,
        wait_schedule_name,
    )
    from continuum.backends.sqs import SQSContinuationQueue

#: Imported on first use: S3 and SQS bring botocore, which a worker on the protocols alone
#: (or on the in-memory twins) does without.
_LAZY = {
    "S3RecordStore": "continuum.backends.s3",
    "SQSContinuationQueue": "continuum.backends.sqs",
    "InMemoryContinuationQueue": "continuum.backends.memory",
    "InMemoryRecordStore": "continuum.backends.memory",
    "ManualClock": "continuum.backends.memory",
    "EventBridgeScheduler": "continuum.backends.eventbridge",
    "InMemoryScheduler": "continuum.backends.memory.scheduler",
    "ScheduleFirer": "continuum.backends.memory.scheduler",
    "recurring_expression": "continuum.backends.recurrence",
    # The scheduler seam: no wait uses it yet, so the worker does not load it.
    **dict.fromkeys(
        [
            "ContinuationScheduler",
            "Fire",
            "InvalidSchedule",
            "Schedule",
            "ScheduleConflict",
            "ScheduleNotFound",
            "ScheduleState",
            "SchedulerError",
            "TransientSchedulerError",
            "parse_scheduled_time",
            "wait_schedule_name",
        ],
        "continuum.backends.scheduler",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'continuum.backends' has no attribute {name!r}")
