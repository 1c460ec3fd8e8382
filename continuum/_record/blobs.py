"""The blobs of task records: content-addressed, compressed values beside each record.

Blobs are shared by content within a task, so two rules keep every record's blobs in place:

- **An upload is skipped only when provably unneeded**: the blob is referenced by the very
  record version a write replaces (its etag). If the write lands, nobody wrote in between,
  so nobody removed the blob. An in-memory "I uploaded it once" is no proof: another worker
  may have removed it since (that stranded tasks).
- **Only the lease holder removes blobs**, right after its own write stopped referencing
  them, and only while its lease has ``GC_LEASE_MARGIN_S`` left. Writes that were refused,
  or writers without a lease, remove nothing; what they leave is swept when the task
  finishes: unreferenced blobs are deleted, referenced ones tagged for the lifecycle rule, and
  only after the finish write landed. The sweep is idempotent and is run again until it
  completes (``sweep.py``: a finished record is tagged only once its sweep is done).

The segments of a large state (``segments.py``) are blobs like any other, under the same
rules: an unchanged segment is skipped only on that proof, and a segment an edit superseded
is removed only by the lease holder (an earlier record version gets it back from its stored
versions, ``Blobs.restore``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from datetime import datetime, timedelta

from continuum._base.clock import utcnow
from continuum._record.codec import PutBlob, pack_blob, unpack_blob
from continuum._record.model import BlobRef, TaskRecord
from continuum.backends.store import NoSuchKey, PreconditionFailed, RecordStore, put_with_retries
from continuum.errors import RecordCorruptError

logger = logging.getLogger("continuum._record.blobs")

#: Finished tasks' objects carry this tag, so a lifecycle rule can expire them.
FINISHED_TAGS = {"continuum-finished": "true"}
FINISHED_TAG = "continuum-finished=true"
#: A lease holder removes superseded blobs only with at least this much lease left, so a
#: removal can never land after another worker took over (and reused the blob).
GC_LEASE_MARGIN_S = 5.0
#: Compressed blobs remembered, so an unchanged large value is not compressed again.
PACKED_CACHE_SIZE = 64
#: Tasks whose latest known record version (and its blobs) a long-lived worker remembers.
HELD_RECORDS = 1024

#: Blob keys -> refs: the blobs one record version references.
BlobKeys = dict[str, BlobRef]


class BlobGone(Exception):
    """A blob the record points at is not in the store."""

    def __init__(self, key: str, ref: BlobRef) -> None:
        self.key, self.ref = key, ref
        super().__init__(key)


class Blobs:
    """The blobs under one prefix of a store, and what this process can prove about them.

    Args:
        store: the bytes (S3, or the in-memory fake).
        prefix: blobs live at ``{prefix}/{task_id}/blobs/{sha256}.json.gz``.
    """

    def __init__(self, store: RecordStore, *, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        #: per task: the etag of the record version last read or written here, and the keys
        #: of the blobs that version references (the only proof that lets an upload be skipped).
        self._held: OrderedDict[str, tuple[str, BlobKeys]] = OrderedDict()
        self._packed: OrderedDict[str, tuple[BlobRef, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def folder(self, task_id: str) -> str:
        """Where the task's blobs are: the prefix of their keys."""
        return f"{self.prefix}/{task_id}/blobs/"

    def key(self, task_id: str, digest: str) -> str:
        return f"{self.folder(task_id)}{digest}.json.gz"

    def keys_of(self, record: TaskRecord) -> BlobKeys:
        """The blobs a (parsed) record references."""
        return {self.key(record.task_id, ref.sha256): ref for ref in record.blob_refs()}

    # -- writing -------------------------------------------------------------------------------

    def uploader(self, task_id: str, *, base_etag: str | None) -> tuple[PutBlob, BlobKeys]:
        """A ``put_blob`` for encoding one record write that replaces version ``base_etag``,
        and the dict it fills with the blobs that write references."""
        held = self._held.get(task_id)
        proven = held[1] if held is not None and held[0] == base_etag else {}
        used: BlobKeys = {}

        def put_blob(digest: str, data: bytes) -> BlobRef:
            key = self.key(task_id, digest)
            ref = proven.get(key) or used.get(key)
            if ref is None:
                ref, packed = self._pack(digest, data)
                if base_etag is None:
                    # A new record's blobs are created, never overwritten: the start-tasks
                    # policy allows only that.
                    _create(self.store, key, packed)
                else:
                    put_with_retries(self.store, key, packed, content_encoding="gzip")
            used[key] = ref
            return ref

        return put_blob, used

    def after_write(
        self,
        task_id: str,
        *,
        base_etag: str | None,
        etag: str,
        used: BlobKeys,
        finished: bool = False,
        lease_until: datetime | None = None,
    ) -> None:
        """A record write that replaced version ``base_etag`` landed as ``etag``, using ``used``.

        Remember the proof. A write by a lease holder with time left removes the blobs the
        replaced version used and this one does not; a finish removes nothing here (the
        caller sweeps the task's objects: ``sweep.py``).
        """
        with self._lock:
            before = self._held.get(task_id)
        self.hold(task_id, etag, used)
        if finished:
            return
        if before is not None and before[0] == base_etag and _lease_left(lease_until):
            for stale in before[1].keys() - used.keys():
                self._remove(stale)

    def hold(self, task_id: str, etag: str, keys: BlobKeys) -> None:
        """Remember that record version ``etag`` of the task references ``keys``."""
        with self._lock:
            self._held.pop(task_id, None)
            self._held[task_id] = (etag, keys)
            while len(self._held) > HELD_RECORDS:  # a long-lived worker must not grow forever
                self._held.popitem(last=False)

    # -- reading -------------------------------------------------------------------------------

    def fetch(self, task_id: str, ref: BlobRef) -> bytes:
        """The packed bytes of a blob. Raises BlobGone."""
        key = self.key(task_id, ref.sha256)
        try:
            return self.store.get(key).body
        except NoSuchKey:
            raise BlobGone(key, ref) from None

    def restore(self, key: str, ref: BlobRef) -> bool:
        """Bring back the newest stored version of a removed blob that matches its digest.

        A restored earlier record version may point at blobs that later writes removed; in a
        versioned bucket they are still there as noncurrent versions.
        """
        try:
            versions = self.store.versions(key)
        except Exception:  # a store without versions (or without permission): cannot restore
            return False
        for version in versions:
            if version.is_delete_marker:
                continue
            try:
                packed = self.store.get(key, version_id=version.version_id).body
                unpack_blob(ref, packed, task_id=key)
            except (NoSuchKey, RecordCorruptError):
                continue
            _create(self.store, key, packed)  # it is gone: a create (an operator may only create)
            logger.warning("restored blob %s from version %s", key, version.version_id)
            return True
        return False

    # -- tidying -------------------------------------------------------------------------------

    def _remove(self, key: str) -> None:
        try:
            self.store.delete(key)
        except Exception as exc:  # a leftover blob is swept when the task finishes
            logger.warning("could not remove superseded blob %s: %s", key, exc)

    def _pack(self, digest: str, data: bytes) -> tuple[BlobRef, bytes]:
        with self._lock:
            cached = self._packed.get(digest)
            if cached is not None:
                self._packed.move_to_end(digest)
                return cached
        packed = pack_blob(data, digest)
        with self._lock:
            self._packed[digest] = packed
            while len(self._packed) > PACKED_CACHE_SIZE:
                self._packed.popitem(last=False)
        return packed


def _lease_left(lease_until: datetime | None) -> bool:
    return lease_until is not None and lease_until - utcnow() > timedelta(seconds=GC_LEASE_MARGIN_S)


def _create(store: RecordStore, key: str, packed: bytes) -> None:
    """Write a blob only if its key is free; one there already is this blob (keys are digests,
    and every read verifies it)."""
    with contextlib.suppress(PreconditionFailed):
        put_with_retries(store, key, packed, if_none_match=True, content_encoding="gzip")
