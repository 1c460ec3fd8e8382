"""In-memory stand-ins for S3 and SQS, faithful enough to run the whole protocol.

``Continuum(store=InMemoryRecordStore(), queue=InMemoryContinuationQueue())`` runs tasks with
no AWS and no moto. The fakes keep the semantics the protocol relies on, as S3 and SQS (and
moto) show them; the functional tests run against both to prove it:

- the store: conditional writes (``If-None-Match: *`` refuses an existing key, ``If-Match``
  a changed etag, both with PreconditionFailed; ``If-Match`` on a missing key NoSuchKey), etags
  that are the MD5 of the body, versions and delete markers, tags, listing with a delimiter;
- the queue: per-message delays, a visibility timeout per receive, receive counts, a new
  receipt handle per receive, and optionally a dead-letter queue after ``max_receive_count``.

Time comes from an injectable clock (``clock()`` returns epoch seconds), so tests can move it.
Each fake has an ``on_call`` hook, called with the operation's name and key before it runs:
raise from it to inject a fault.
"""

from continuum.testing.clock import ManualClock
from continuum.testing.memory_queue import InMemoryContinuationQueue
from continuum.testing.memory_store import InMemoryRecordStore

__all__ = [
    "InMemoryContinuationQueue",
    "InMemoryRecordStore",
    "ManualClock",
]
