"""The in-memory backend: S3, SQS and EventBridge Scheduler as continuum relies on them.

``continuum.testing`` exports these for users' tests; the local runtime (``_local/runtime.py``) runs
on them with ``backend="memory"``. They live here, beside the core, so that the core never
imports the test helpers.
"""

from continuum.backends.memory.clock import ManualClock
from continuum.backends.memory.queue import InMemoryContinuationQueue
from continuum.backends.memory.scheduler import InMemoryScheduler, ScheduleFirer
from continuum.backends.memory.store import InMemoryRecordStore

__all__ = [
    "InMemoryContinuationQueue",
    "InMemoryRecordStore",
    "InMemoryScheduler",
    "ManualClock",
    "ScheduleFirer",
]
