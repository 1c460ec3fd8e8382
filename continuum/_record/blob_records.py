"""The record-level seam (``persistence.Records``) on a blob store: S3, or the in-memory bucket.

The one place above the blob store that knows its shape: a record is ``record.json`` under
``{prefix}/{task_id}/``, its revision is the object's etag, its history the bucket's versions,
its inbox the objects under ``inbox/``, the task ids the listing's folders, the sweep's mark a
tag. Every write of a record is conditional: ``create`` uses ``If-None-Match: *`` so a task id
is started once; ``swap`` uses ``If-Match`` on the etag the writer last saw, so a worker that
lost the record (:class:`RecordConflictError`) stops instead of overwriting.

Large values go to blobs beside the record (``blobs.py``: when an upload may be skipped,
who removes superseded blobs, and the sweep when a task finishes).

When a task finishes, ``swap`` sweeps its objects (``sweep.py``) after the write lands;
a sweep cut short is finished by a later message of the task.
"""

from __future__ import annotations

import functools
import logging
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from continuum._base.clock import utcnow
from continuum._base.trace_ids import stack_of
from continuum._record.blobs import FINISHED_TAGS, BlobGone, BlobKeys, Blobs
from continuum._record.codec import (
    DEFAULT_INLINE_LIMIT_BYTES,
    describe_blobs,
    encode_record,
    inline_blobs,
    parse_record,
    unpack_blob,
)
from continuum._record.inbox import Inbox
from continuum._record.model import BlobRef, TaskRecord
from continuum._record.persistence import PastRecord, Records
from continuum._record.segments import DEFAULT_SEGMENTING, Segmenting
from continuum._record.sweep import Sweeper, SweepIncompleteError
from continuum.backends.store import NoSuchKey, PreconditionFailed, RecordStore, put_with_retries
from continuum.errors import (
    BlobMissingError,
    ConfigurationError,
    ContinuumError,
    RecordConflictError,
    RecordExistsError,
    RecordNotFoundError,
)

if TYPE_CHECKING:
    from continuum._record.schedule_runs import RunMarkers

logger = logging.getLogger("continuum._record.blob_records")

RECORD_NAME = "record.json"
#: How often a reader retries when a blob vanished under it (a writer superseded it).
BLOB_RACE_RETRIES = 2


class BlobRecords:
    """The task records under one prefix of a blob store (``persistence.Records`` on it).

    Args:
        store: the bytes (S3, or the in-memory fake).
        prefix: the key prefix of the records: ``{prefix}/{task_id}/record.json``.
        inline_limit: values whose JSON is larger go to blobs.
        max_value_bytes: the largest state, result, step result or cursor accepted (JSON).
        segmenting: where a large state's large lists are cut into segments, so that a
            checkpoint uploads only the segments that changed (None: the state is one blob).
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        prefix: str = "tasks",
        inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES,
        max_value_bytes: int | None = None,
        segmenting: Segmenting | None = DEFAULT_SEGMENTING,
    ) -> None:
        self.store = store
        self.prefix = prefix.strip("/")
        self.inline_limit = inline_limit
        self.max_value_bytes = max_value_bytes
        self.segmenting = segmenting
        self.blobs = Blobs(store, prefix=self.prefix)
        self.inbox = Inbox(self, stack=self.stack)
        self.sweeper = Sweeper(store, self.blobs, self.inbox_key, self.record_key)
        self._local = threading.local()

    @property
    def stack(self) -> str:
        """Where these records live (bucket and prefix): their tasks' trace ids derive from it."""
        return stack_of(self.store, self.prefix)

    @functools.cached_property
    def run_markers(self) -> RunMarkers:
        """What each recurring schedule's fires did, beside the records (made on first use:
        only an app with schedules needs it)."""
        from continuum._record.schedule_runs import BlobRunMarkers

        return BlobRunMarkers(self.store, prefix=self.prefix)

    @property
    def last_record_bytes(self) -> int:
        """Size of the record this thread last wrote or read (for counters and benchmarks)."""
        return int(getattr(self._local, "size", 0))

    def record_key(self, task_id: str) -> str:
        return f"{self.prefix}/{task_id}/{RECORD_NAME}"

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
        self.blobs.hold(record.task_id, etag, used)
        return etag

    def load(self, task_id: str) -> tuple[TaskRecord, str]:
        """Read a record and its etag: one GET, then its blobs, in parallel, verified.

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
            gone = self._inline(record)
            if gone and attempt < BLOB_RACE_RETRIES and self._moved(key, stored.etag):
                continue  # a writer replaced the record and removed blobs: read it again
            if gone:  # an earlier record version was restored: bring its blobs back
                self._restore(record, gone)
                gone = self._inline(record)
            if not gone:
                self.blobs.hold(task_id, stored.etag, self.blobs.keys_of(record))
                return record, stored.etag
        raise self._missing(record, gone)

    def _inline(self, record: TaskRecord) -> list[BlobGone]:
        """Fetch the record's blobs into it; the blobs that are gone (then it is unchanged)."""
        gone: list[BlobGone] = []

        def fetch(ref: BlobRef) -> bytes:
            try:
                return self.blobs.fetch(record.task_id, ref)
            except BlobGone as missing:
                gone.append(missing)  # list.append is atomic: fetches run in parallel
                raise

        try:
            inline_blobs(record, fetch)
        except BlobGone:
            return sorted(gone, key=lambda missing: missing.key)
        return []

    def _restore(self, record: TaskRecord, gone: list[BlobGone]) -> None:
        """Restore every gone blob from a stored version, or raise BlobMissingError."""
        lost = [missing for missing in gone if not self.blobs.restore(missing.key, missing.ref)]
        if lost:
            raise self._missing(record, lost)

    def _missing(self, record: TaskRecord, gone: list[BlobGone]) -> BlobMissingError:
        first = gone[0]
        what = describe_blobs(record).get(first.ref.sha256, "a blob")
        others = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
        return BlobMissingError(
            f"the record points at {what}, blob {first.key}{others}, which is gone, and no "
            "stored version of it matches its digest",
            task_id=record.task_id,
            hint="restore that blob from a backup (or an earlier record version whose "
            "blobs still exist), then run `continuum resume TASK_ID`",
        )

    def swap(
        self,
        record: TaskRecord,
        *,
        revision: str,
        finished: bool = False,
        lease_until: datetime | None = None,
    ) -> str:
        """Compare-and-swap: write ``record`` only if the stored one still has etag ``revision``.

        Args:
            record: the new record (``updated_at`` is set here).
            revision: the etag of the version this write replaces.
            finished: the task finished: sweep its objects after the write lands.
            lease_until: the writer's lease; with enough of it left, blobs this write stopped
                referencing are removed at once.

        Raises:
            RecordConflictError: another writer moved the record (412); this one must stop.
            PayloadTooLargeError: a value is over ``max_value_bytes``; nothing was written.
            SweepIncompleteError: the finish write landed (its etag is the error's revision), its
                sweep did not complete.
        """
        etag = revision
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
        self.blobs.after_write(
            record.task_id,
            base_etag=etag,
            etag=new_etag,
            used=used,
            finished=finished,
            lease_until=lease_until,
        )
        if finished:
            try:
                self.sweeper.sweep(record.task_id, used)
            except SweepIncompleteError as exc:
                exc.revision = new_etag
                raise
        return new_etag

    def ensure_swept(self, record: TaskRecord) -> bool:
        return self.sweeper.ensure_swept(record)

    def load_version(self, task_id: str, version: str) -> TaskRecord:
        """An earlier version of a record (bucket versioning), blobs inline; reads only.

        A blob that a later write removed is read from its own earlier versions.

        Raises:
            RecordNotFoundError: no such version. BlobMissingError: a blob it needs is gone.
        """
        key, version_id = self.record_key(task_id), version
        try:
            if not version_id:  # the store reads no version id as the current one
                raise NoSuchKey(key)
            body = self.store.get(key, version_id=version_id).body
        except NoSuchKey:
            raise RecordNotFoundError(
                f"no version {version_id!r} of this task's record", task_id=task_id
            ) from None

        def read_blob(ref: BlobRef) -> bytes:
            blob_key = self.blobs.key(task_id, ref.sha256)
            try:
                return self.store.get(blob_key).body
            except NoSuchKey:
                pass
            for version in self.store.versions(blob_key):
                if not version.is_delete_marker:
                    return self.store.get(blob_key, version_id=version.version_id).body
            raise BlobMissingError(f"blob {blob_key} is gone", task_id=task_id)

        return inline_blobs(parse_record(body, task_id=task_id), read_blob)

    def history(self, task_id: str, *, most: int) -> list[PastRecord]:
        """The bucket's versions of the record (one ListObjectVersions), then each version and
        its state's blob (a GET each), oldest first."""
        key = self.record_key(task_id)
        try:
            found = [v for v in self.store.versions(key) if not v.is_delete_marker][:most]
        except Exception:  # no versioning, or no permission to list versions: the current only
            return []
        past: list[PastRecord] = []
        for version in reversed(found):  # oldest first
            try:
                body = self.store.get(key, version_id=version.version_id).body
                old = parse_record(body, task_id=task_id)
            except (NoSuchKey, ContinuumError, ValueError):
                continue
            state, missing = old.state, False
            if old.state_ref is not None:
                try:
                    state = self.large_value(task_id, old.state_ref.sha256)
                except (NoSuchKey, ContinuumError, ValueError):
                    state, missing = None, True
            past.append(PastRecord(version.version_id, version.last_modified, old, state, missing))
        return past

    def large_value(self, task_id: str, digest: str) -> Any:
        key = self.blobs.key(task_id, digest)
        try:
            packed = self.store.get(key).body
        except NoSuchKey:
            raise BlobMissingError(f"blob {key} is gone", task_id=task_id) from None
        ref = BlobRef(sha256=digest, size=0, stored=len(packed))
        return unpack_blob(ref, packed, task_id=task_id)

    def revive(self, task_id: str, used: list[BlobRef]) -> None:
        """Take the finished tag off a record and the blobs it uses (a retried task). The tag
        is overwritten, not removed: an empty tag set is valid on S3 but fails on moto."""
        reopened = dict.fromkeys(FINISHED_TAGS, "false")
        for key in [self.record_key(task_id), *(self.blobs.key(task_id, r.sha256) for r in used)]:
            try:
                self.store.tag(key, reopened)
            except Exception as exc:  # only the lifecycle rule's expiry depends on it
                logger.warning("could not untag %s: %s", key, exc)

    def task_ids(self) -> list[str]:
        """Every task id under the prefix (one LIST per thousand tasks)."""
        folders = self.store.list_keys(f"{self.prefix}/", delimiter="/")
        names = (f[len(self.prefix) + 1 :].rstrip("/") for f in folders if f.endswith("/"))
        return sorted(name for name in names if not name.startswith("_"))  # the schedules' own

    # -- the inbox: objects under {prefix}/{task_id}/inbox/ ----------------------------------

    def inbox_key(self, task_id: str, name: str) -> str:
        return f"{self.prefix}/{task_id}/inbox/{name}"

    def inbox_put(self, task_id: str, name: str, body: bytes, *, create: bool) -> bool:
        key = self.inbox_key(task_id, name)
        if not create:
            put_with_retries(self.store, key, body)
            return True
        try:
            put_with_retries(self.store, key, body, if_none_match=True)
        except PreconditionFailed:
            # A retried PUT whose first attempt landed finds its own object: an equal body
            # (the inbox's bodies are unique) means the write was ours.
            try:
                return self.store.get(key).body == body
            except NoSuchKey:
                return False
        return True

    def inbox_get(self, task_id: str, name: str) -> bytes | None:
        try:
            return self.store.get(self.inbox_key(task_id, name)).body
        except NoSuchKey:
            return None

    def inbox_list(self, task_id: str) -> list[str]:
        base = self.inbox_key(task_id, "")
        return sorted(key[len(base) :] for key in self.store.list_keys(base))

    def inbox_delete(self, task_id: str, name: str) -> None:
        self.store.delete(self.inbox_key(task_id, name))

    # -- encoding and writing ---------------------------------------------------------------

    def _encode(self, record: TaskRecord, *, base_etag: str | None) -> tuple[bytes, BlobKeys]:
        """The record's JSON, and the blobs it references (uploaded if not proven there)."""
        put_blob, used = self.blobs.uploader(record.task_id, base_etag=base_etag)
        body = encode_record(
            record,
            put_blob=put_blob,
            inline_limit=self.inline_limit,
            max_value_bytes=self.max_value_bytes,
            segmenting=self.segmenting,
        )
        self._local.size = len(body)
        return body, used

    def _put(
        self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        return put_with_retries(
            self.store, key, body, if_match=if_match, if_none_match=if_none_match
        )

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


def on_blobs(records: Records, *, needs: str) -> BlobRecords:
    """``records``, for ``needs``, which reads the blob store under them (keys, a listing).

    Raises:
        ConfigurationError: the records are not on a blob store (``records=`` was given).
    """
    if isinstance(records, BlobRecords):
        return records
    raise ConfigurationError(
        f"{needs} needs the task records on a blob store (S3 or a RecordStore); this app "
        f"was given records={type(records).__name__}",
        hint="configure the app with store= or bucket= for it",
    )
