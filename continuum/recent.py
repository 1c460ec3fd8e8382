"""The records a warm worker suspended last, kept to save a GET on their continuation.

A warm Lambda environment often receives the continuation of the task it just suspended. It
then knows the stored record exactly (it wrote it) and can claim it directly: the claim's
``If-Match`` on the remembered etag proves the record has not changed since, and a 412 sends
the worker back to reading it. Only a continuation for exactly the remembered generation of a
suspended record is served from memory; anything else reads the store. Each entry is taken
once: a record served from memory is forgotten, whatever happens next.
"""

from __future__ import annotations

import threading

from continuum.continuation import Continuation
from continuum.record import Status, TaskRecord

#: How many suspended records a worker remembers.
RECENT_RECORDS = 8


class RecentRecords:
    """The last few records this worker suspended, with their etags and send times."""

    def __init__(self, size: int = RECENT_RECORDS) -> None:
        self.size = size
        self._records: dict[str, tuple[TaskRecord, str]] = {}
        self._sends: dict[str, float] = {}
        self._lock = threading.Lock()

    def keep(self, record: TaskRecord, etag: str, *, send_s: float) -> None:
        with self._lock:
            for kept in (self._records, self._sends):
                kept.pop(record.task_id, None)
            self._records[record.task_id] = (record, etag)
            self._sends[record.task_id] = send_s
            for kept in (self._records, self._sends):
                while len(kept) > self.size:
                    del kept[next(iter(kept))]

    def last_send_s(self, task_id: str) -> float | None:
        """How long this worker's last send of the task's continuation took, once."""
        with self._lock:
            return self._sends.pop(task_id, None)

    def take(self, message: Continuation) -> tuple[TaskRecord, str] | None:
        """The remembered record if ``message`` continues exactly it, else None."""
        with self._lock:
            mine = self._records.pop(message.task_id, None)
        if mine is None:
            return None
        record, _etag = mine
        if record.status != Status.SUSPENDED or record.generation != message.generation:
            return None
        return mine
