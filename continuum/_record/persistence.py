"""The record-level seam: what the worker, the client and the operators ask of storage.

:class:`Records` speaks of task records, their inboxes, their history and their sweep, never
of keys, etags, tags, versions or listings: those belong to one implementation of it,
``blob_records.BlobRecords``, on a :class:`~continuum.backends.RecordStore` (S3, or the
in-memory bucket), which stays the blob store below it. A backend of another shape (a table
with conditional writes, say DynamoDB) would implement this protocol instead and pass the
record-level contract suite (``tests/backends/test_records_contract.py``); the app builds
``BlobRecords`` on the store or bucket it is given, or takes such a backend as
``Continuum(records=...)``.

A *revision* is an opaque string that the seam hands out with every record it loads or
writes, and that changes with every write of the record (S3: its etag; a table: a version
attribute). A swap is conditional on it, not on the record's ``generation``: the generation
fences continuations and stays the same across the saves of one invocation, each of which
must still fence the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from continuum._record.inbox import Inbox, InboxObjects
from continuum._record.model import BlobRef, TaskRecord

if TYPE_CHECKING:
    from continuum._record.schedule_runs import RunMarkers


class PastRecord(NamedTuple):
    """One earlier write of a record, as the history keeps it.

    ``version``: what :meth:`Records.load_version` reads it again by; ``record``: as written,
    its state inline when the state's blob could be read (``state_missing`` when it could
    not), other large values still references.
    """

    version: str
    saved_at: datetime
    record: TaskRecord
    state: Any
    state_missing: bool


class Records(InboxObjects, Protocol):
    """The task records of one deployment, their inboxes, history and sweep.

    Every method is safe to call from several threads and several processes at once; the
    atomicity each one promises is the store's, not a lock's in this process.

    Records:
        - :meth:`load` reads the current record and its revision. Absent: it raises
          :class:`~continuum.errors.RecordNotFoundError`, never returns None.
        - :meth:`create` writes a record only if its task id has none (atomically: of two
          creates of one id exactly one succeeds; the other raises
          :class:`~continuum.errors.RecordExistsError`). A create retried after its reply was
          lost must count as the one that landed (the same record read back is ours).
        - :meth:`swap` replaces the record only if the stored one still has ``revision``
          (compare-and-swap, atomic with the write); otherwise, or if the record is gone, it
          raises :class:`~continuum.errors.RecordConflictError` and writes nothing. A swap
          retried after its reply was lost must count as landed, as a create does.
        - Reads after a write that returned see that write (read-after-write), as S3 does.
    Inbox (the methods of :class:`InboxObjects`, under names such as ``signals/s/1.json``):
        - ``inbox_put(..., create=True)`` writes only if the name is free, atomically: of two
          puts of one name exactly one returns True. ``create=False`` overwrites.
        - ``inbox_list`` answers every name present when it was called (a put that returned
          before is in it), in ascending code-point order; which signal is taken first is
          decided above the seam, by the times inside the objects, not by this order.
        - ``inbox_get`` returns None for an absent name; ``inbox_delete`` of an absent name
          does nothing.
    History:
        - every create and swap appends the record as written to the task's history (S3:
          bucket versioning); :meth:`history` reads the latest ``most`` of them, oldest
          first, and is empty where the backend keeps none; :meth:`load_version` reads one.
    Sweep:
        - a swap with ``finished=True`` marks the task's objects for expiry after the write
          lands; :meth:`ensure_swept` finishes a sweep that was cut short (idempotent), and
          :meth:`revive` takes the mark off again when a finished task is retried.
    """

    @property
    def stack(self) -> str:
        """Where these records live (for a bucket: the bucket and prefix); their tasks' trace
        ids derive from it, so it must differ between deployments."""
        ...

    @property
    def inbox(self) -> Inbox:
        """The tasks' inboxes, on this seam's inbox methods."""
        ...

    @property
    def max_value_bytes(self) -> int | None:
        """The largest state, result, step result or cursor accepted (JSON); None: no limit."""
        ...

    @property
    def last_record_bytes(self) -> int:
        """Size of the record this thread last wrote or read (for counters and benchmarks)."""
        ...

    @property
    def run_markers(self) -> RunMarkers:
        """What each recurring schedule's fires did, kept beside the records (a
        :class:`~continuum._record.schedule_runs.RunMarkers`: its docstring is its contract)."""
        ...

    def load(self, task_id: str) -> tuple[TaskRecord, str]:
        """The current record, every value inline, and its revision.

        Raises:
            RecordNotFoundError: no record for this task id.
            RecordCorruptError: it does not parse (BlobMissingError: a value of it is gone).
            RecordTooNewError: a newer continuum wrote it.
        """
        ...

    def create(self, record: TaskRecord) -> str:
        """Write a new record, only if its task id has none; return its revision.

        Raises:
            RecordExistsError: the task id is taken.
            PayloadTooLargeError: a value is over ``max_value_bytes``; nothing was written.
        """
        ...

    def swap(
        self,
        record: TaskRecord,
        *,
        revision: str,
        finished: bool = False,
        lease_until: datetime | None = None,
    ) -> str:
        """Compare-and-swap: write ``record`` only if the stored one still has ``revision``;
        return the new revision (``record.updated_at`` is set here).

        Args:
            finished: the task finished: sweep its objects once the write has landed.
            lease_until: the writer's lease; with enough of it left, what this write stopped
                referencing may be removed at once.

        Raises:
            RecordConflictError: another writer moved the record, or it is gone; nothing was
                written and this writer must stop.
            PayloadTooLargeError: a value is over ``max_value_bytes``; nothing was written.
            SweepIncompleteError: the finish write landed (its revision is the error's
                ``revision``), its sweep did not complete.
        """
        ...

    def task_ids(self) -> list[str]:
        """Every task id that has a record, sorted (one LIST a thousand tasks on S3). It may
        also name a task id that has inbox objects only (a refused forged start, a cancel
        for an id never started): a caller loads each and skips what raises."""
        ...

    def history(self, task_id: str, *, most: int) -> list[PastRecord]:
        """The latest ``most`` writes of the record, oldest first; empty if the backend keeps
        no history (or may not read it). A write that cannot be read is left out."""
        ...

    def load_version(self, task_id: str, version: str) -> TaskRecord:
        """One earlier write of the record (``PastRecord.version``), every value inline.

        Raises:
            RecordNotFoundError: no such version. BlobMissingError: a value it needs is gone.
        """
        ...

    def large_value(self, task_id: str, digest: str) -> Any:
        """A value a record keeps outside itself (a ``BlobRef``: its state, a step's result),
        by its digest, as it was stored.

        Raises:
            BlobMissingError: no such value (gone, or never stored).
            RecordCorruptError: it does not match its digest, or does not parse.
        """
        ...

    def ensure_swept(self, record: TaskRecord) -> bool:
        """For a message of a finished task: finish its sweep unless it completed; return
        whether it swept now (one read when it had completed).

        Raises:
            SweepIncompleteError: the sweep ran and did not complete (retry the message).
        """
        ...

    def revive(self, task_id: str, used: list[BlobRef]) -> None:
        """Take the finished mark off a record and the values it uses (a retried task); a
        failure is logged, not raised (only expiry depends on it)."""
        ...
