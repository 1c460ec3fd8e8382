"""The in-memory backend: S3 and SQS as continuum relies on them, in this process.

``continuum.testing`` exports these for users' tests; the local runtime (``local.py``) runs
on them with ``backend="memory"``. They live here, beside the core, so that the core never
imports the test helpers.
"""

from continuum.backends.memory.clock import ManualClock
from continuum.backends.memory.queue import InMemoryContinuationQueue
from continuum.backends.memory.store import InMemoryRecordStore

__all__ = ["InMemoryContinuationQueue", "InMemoryRecordStore", "ManualClock"]
