"""Task records on a RecordStore: create, load, compare-and-swap, and their blobs.

Every write of a record is conditional: ``create`` uses ``If-None-Match: *`` so a task id is
started once; ``replace`` uses ``If-Match`` on the etag the writer last saw, so a worker that
lost the record (:class:`RecordConflictError`) stops instead of overwriting.

Blobs (``codec.py``) are shared by content within a task, so two rules keep every record's
blobs in place:

- **An upload is skipped only when provably unneeded**: the blob is referenced by the very
  record version this write replaces (its etag). If the write lands, nobody wrote in between,
  so nobody removed the blob. An in-memory "I uploaded it once" is no proof: another worker
  may have removed it since (that stranded tasks).
- **Only the lease holder removes blobs**, right after its own write stopped referencing
  them, and only while its lease has ``GC_LEASE_MARGIN_S`` left. Writes that were refused,
  or writers without a lease, remove nothing; what they leave is swept when the task
  finishes: unreferenced blobs are deleted, referenced ones tagged for the lifecycle rule, and
  only after the finish write landed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from datetime import datetime, timedelta

from continuum.codec import (
    DEFAULT_INLINE_LIMIT_BYTES,
    encode_record,
    inline_blobs,
    pack_blob,
    parse_record,
    unpack_blob,
)
from continuum.errors import (
    BlobMissingError,
    RecordConflictError,
    RecordCorruptError,
    RecordExistsError,
    RecordNotFoundError,
)
from continuum.record import BlobRef, TaskRecord, utcnow
from continuum.store import NoSuchKey, PreconditionFailed, RecordStore, TransientStoreError

logger = logging.getLogger("continuum.records")

RECORD_NAME = "record.json"
#: Finished tasks' objects carry this tag, so a lifecycle rule can expire them.
FINISHED_TAGS = {"continuum-finished": "true"}
FINISHED_TAG = "continuum-finished=true"
#: Transient store errors are tried again this often, with this backoff doubling from here.
WRITE_RETRIES = 3
WRITE_BACKOFF_S = 0.05
#: How often a reader retries when a blob vanished under it (a writer superseded it).
BLOB_RACE_RETRIES = 2
#: A lease holder removes superseded blobs only with at least this much lease left, so a
#: removal can never land after another worker took over (and reused the blob).
GC_LEASE_MARGIN_S = 5.0
#: Compressed blobs remembered, so an unchanged large value is not compressed again.
PACKED_CACHE_SIZE = 64


class Records:
    """The task records under one prefix of a store.

    Args:
        store: the bytes (S3, or the in-memory fake).
        prefix: the key prefix of the records: ``{prefix}/{task_id}/record.json``.
        inline_limit: values whose JSON is larger go to blobs.
        max_value_bytes: the largest state, result, step result or cursor accepted (JSON).
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        prefix: str = "tasks",
        inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES,
        max_value_bytes: int | None = None,
    ) -> None:
        self.store = store
        self.prefix = prefix.strip("/")
        self.inline_limit = inline_limit
        self.max_value_bytes = max_value_bytes
        #: per task: the etag of the record version last read or written here, and the keys
        #: of the blobs that version references (the only proof that lets an upload be skipped).
        self._held: dict[str, tuple[str, dict[str, BlobRef]]] = {}
        self._packed: OrderedDict[str, tuple[BlobRef, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def last_record_bytes(self) -> int:
        """Size of the record this thread last wrote or read (for counters and benchmarks)."""
        return int(getattr(self._local, "size", 0))

    def record_key(self, task_id: str) -> str:
        return f"{self.prefix}/{task_id}/{RECORD_NAME}"

    def blob_key(self, task_id: str, digest: str) -> str:
        return f"{self.prefix}/{task_id}/blobs/{digest}.json.gz"

    # -- create, load, replace ---------------------------------------------------------------

    def create(self, record: TaskRecord) -> str:
        """Write a new record; raise RecordExistsError if the task id is taken."""
        body, used = self._encode(record, base_etag=None)
        key = self.record_key(record.task_id)
        try:
            etag = self._put(key, body, if_none_match=True)
        except PreconditionFailed:
            etag_or_none = self._landed(key, body)
            if etag_or_none is None:
                raise RecordExistsError("task already exists", task_id=record.task_id) from None
            etag = etag_or_none
        self._hold(record.task_id, etag, used)
        return etag

    def load(self, task_id: str) -> tuple[TaskRecord, str]:
        """Read a record and its etag; its blobs are fetched and verified.

        Raises:
            RecordNotFoundError: no such task.
            RecordCorruptError: it does not parse (BlobMissingError: a blob is gone for good).
            RecordTooNewError: a newer continuum wrote it.
        """
        key = self.record_key(task_id)
        for attempt in range(BLOB_RACE_RETRIES + 1):
            try:
                stored = self.store.get(key)
            except NoSuchKey:
                raise RecordNotFoundError("no record for this task", task_id=task_id) from None
            self._local.size = len(stored.body)
            record = parse_record(stored.body, task_id=task_id)
            try:
                inline_blobs(record, lambda ref: self._get_blob(task_id, ref))
            except _BlobGone as gone:
                if attempt < BLOB_RACE_RETRIES and self._moved(key, stored.etag):
                    continue  # a writer replaced the record and removed the blob: read again
                if self._restore_blob(gone.key, gone.ref):
                    continue
                raise BlobMissingError(
                    f"the record points at blob {gone.key}, which is gone, and no stored "
                    "version of it matches its digest",
                    task_id=task_id,
                    hint="restore that blob from a backup (or an earlier record version whose "
                    "blobs still exist), then run `continuum resume TASK_ID`",
                ) from None
            self._hold(task_id, stored.etag, self._blob_keys(record))
            return record, stored.etag
        raise AssertionError("unreachable")  # pragma: no cover

    def replace(
        self,
        record: TaskRecord,
        *,
        etag: str,
        finished: bool = False,
        lease_until: datetime | None = None,
    ) -> str:
        """Compare-and-swap: write ``record`` only if the stored one still has ``etag``.

        Args:
            record: the new record (``updated_at`` is set here).
            etag: the etag of the version this write replaces.
            finished: the task finished: sweep its blobs after the write lands.
            lease_until: the writer's lease; with enough of it left, blobs this write stopped
                referencing are removed at once.

        Raises:
            RecordConflictError: another writer moved the record (412); this one must stop.
            PayloadTooLargeError: a value is over ``max_value_bytes``; nothing was written.
        """
        record.updated_at = utcnow()
        body, used = self._encode(record, base_etag=etag)
        key = self.record_key(record.task_id)
        try:
            new_etag = self._put(key, body, if_match=etag)
        except (PreconditionFailed, NoSuchKey):  # S3 answers 404 to If-Match on a gone key
            landed = self._landed(key, body)
            if landed is None:
                raise RecordConflictError(
                    "another worker changed the record (412); stopping without writing",
                    task_id=record.task_id,
                    generation=record.generation,
                ) from None
            new_etag = landed
        before = self._held.get(record.task_id)
        self._hold(record.task_id, new_etag, used)
        if finished:
            self._sweep(record.task_id, used)
        elif before is not None and before[0] == etag and _lease_left(lease_until):
            for stale in before[1].keys() - used.keys():
                self._remove(stale)
        return new_etag

    def task_ids(self) -> list[str]:
        """Every task id under the prefix (one LIST per thousand tasks)."""
        folders = self.store.list_keys(f"{self.prefix}/", delimiter="/")
        return sorted(f[len(self.prefix) + 1 :].rstrip("/") for f in folders if f.endswith("/"))

    # -- blobs -------------------------------------------------------------------------------

    def _encode(
        self, record: TaskRecord, *, base_etag: str | None
    ) -> tuple[bytes, dict[str, BlobRef]]:
        """The record's JSON, and the keys of the blobs it references (uploaded if needed)."""
        held = self._held.get(record.task_id)
        proven = held[1] if held is not None and held[0] == base_etag else {}
        used: dict[str, BlobRef] = {}

        def put_blob(digest: str, data: bytes) -> BlobRef:
            key = self.blob_key(record.task_id, digest)
            ref = proven.get(key) or used.get(key)
            if ref is None:
                ref, packed = self._pack(digest, data)
                self._put(key, packed, content_encoding="gzip")
            used[key] = ref
            return ref

        body = encode_record(
            record,
            put_blob=put_blob,
            inline_limit=self.inline_limit,
            max_value_bytes=self.max_value_bytes,
        )
        self._local.size = len(body)
        return body, used

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

    def _get_blob(self, task_id: str, ref: BlobRef) -> bytes:
        key = self.blob_key(task_id, ref.sha256)
        try:
            return self.store.get(key).body
        except NoSuchKey:
            raise _BlobGone(key, ref) from None

    def _restore_blob(self, key: str, ref: BlobRef) -> bool:
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
            self._put(key, packed, content_encoding="gzip")
            logger.warning("restored blob %s from version %s", key, version.version_id)
            return True
        return False

    def _sweep(self, task_id: str, used: dict[str, BlobRef]) -> None:
        """After a finish write landed: tag the blobs it uses, delete every other one."""
        try:
            keys = self.store.list_keys(f"{self.prefix}/{task_id}/blobs/")
        except Exception as exc:
            logger.warning("could not list blobs of finished task %s: %s", task_id, exc)
            keys = sorted(used)
        for key in keys:
            try:
                if key in used:
                    self.store.tag(key, FINISHED_TAGS)
                else:
                    self.store.delete(key)
            except Exception as exc:  # a blob left behind wastes storage, no more
                logger.warning("could not tidy blob %s: %s", key, exc)
        try:
            self.store.tag(self.record_key(task_id), FINISHED_TAGS)
        except Exception as exc:
            logger.warning("could not tag finished record %s: %s", task_id, exc)

    def _remove(self, key: str) -> None:
        try:
            self.store.delete(key)
        except Exception as exc:  # a leftover blob is swept when the task finishes
            logger.warning("could not remove superseded blob %s: %s", key, exc)

    def _blob_keys(self, record: TaskRecord) -> dict[str, BlobRef]:
        return {self.blob_key(record.task_id, ref.sha256): ref for ref in record.blob_refs()}

    def _hold(self, task_id: str, etag: str, keys: dict[str, BlobRef]) -> None:
        with self._lock:
            self._held.pop(task_id, None)
            self._held[task_id] = (etag, keys)
            while len(self._held) > 1024:  # a long-lived worker must not grow forever
                del self._held[next(iter(self._held))]

    # -- the store, with retries ---------------------------------------------------------------

    def _put(
        self,
        key: str,
        body: bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        content_encoding: str | None = None,
    ) -> str:
        for attempt in range(WRITE_RETRIES + 1):
            try:
                return self.store.put(
                    key,
                    body,
                    if_match=if_match,
                    if_none_match=if_none_match,
                    content_encoding=content_encoding,
                )
            except TransientStoreError:
                if attempt == WRITE_RETRIES:
                    raise
                time.sleep(WRITE_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _landed(self, key: str, body: bytes) -> str | None:
        """After a 412: did our own write land (an earlier attempt whose answer was lost)?

        A retried PutObject whose first attempt succeeded finds its own write and answers 412.
        The record's body is unique (it carries ``updated_at``), so if the stored body is ours
        the write happened, and its etag is the new one.
        """
        try:
            stored = self.store.get(key)
        except NoSuchKey:
            return None
        return stored.etag if stored.body == body else None

    def _moved(self, key: str, etag: str) -> bool:
        try:
            return self.store.get(key).etag != etag
        except NoSuchKey:
            return True


class _BlobGone(Exception):
    def __init__(self, key: str, ref: BlobRef) -> None:
        self.key, self.ref = key, ref
        super().__init__(key)


def _lease_left(lease_until: datetime | None) -> bool:
    return lease_until is not None and lease_until - utcnow() > timedelta(seconds=GC_LEASE_MARGIN_S)
