"""The records a warm worker parked last, kept to save a GET on their next message.

A warm Lambda environment often receives the continuation of the task it just suspended, or
the next timer of a long sleep it just hopped. It then knows the stored record exactly (it
wrote it) and can go on from it directly: the ``If-Match`` of the claim or hop on the
remembered revision proves the record has not changed since, and a 412 sends the worker back to
reading it. Only a continuation for exactly the remembered generation of a suspended record,
or a timer for exactly that of a waiting one, is served from memory; anything else reads the
store, and so does a message that memory would not end in one of those conditional writes.
Each entry is taken once: a record served from memory is forgotten, whatever happens next.
"""

from __future__ import annotations

import threading

from continuum._record.continuation import Continuation
from continuum._record.model import Status, TaskRecord

#: How many suspended records a worker remembers.
RECENT_RECORDS = 8


class RecentRecords:
    """The last few records this worker suspended, with their revisions and send times."""

    def __init__(self, size: int = RECENT_RECORDS) -> None:
        self.size = size
        self._records: dict[str, tuple[TaskRecord, str]] = {}
        self._sends: dict[str, float] = {}
        self._lock = threading.Lock()

    def keep(self, record: TaskRecord, revision: str, *, send_s: float | None = None) -> None:
        """Remember ``record`` as written with ``revision`` (and how long its continuation's send
        took, for the claim's budget); the caller must not change it afterwards."""
        with self._lock:
            for kept in (self._records, self._sends):
                kept.pop(record.task_id, None)
            self._records[record.task_id] = (record, revision)
            if send_s is not None:
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
        record, _revision = mine
        if record.generation != message.generation:
            return None
        if record.status == Status.SUSPENDED:
            return mine
        if record.status == Status.WAITING and message.kind == "timer":
            return mine
        return None

    def clear(self) -> None:
        """Forget everything (as a fresh environment knows nothing)."""
        with self._lock:
            self._records.clear()
            self._sends.clear()
