"""S3: the record store. Create, load, compare-and-swap and blobs, on an injected client.

Every write of the record is conditional: ``create`` uses ``If-None-Match: *`` so a task id is
started once; ``replace`` uses ``If-Match`` on the etag this worker last saw, so a worker that
lost the record (S3 answers ``412 PreconditionFailed``) stops instead of overwriting.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from continuum.errors import (
    RecordConflictError,
    RecordCorruptError,
    RecordExistsError,
    RecordNotFoundError,
)
from continuum.record import (
    DEFAULT_INLINE_LIMIT_BYTES,
    BlobRef,
    TaskRecord,
    decode_record,
    encode_record,
    pack_blob,
    utcnow,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

RECORD_NAME = "record.json"
#: Finished tasks' objects carry this tag, so a lifecycle rule can expire them.
FINISHED_TAG = "continuum-finished=true"
_FINISHED_TAG_SET: Any = {"Key": "continuum-finished", "Value": "true"}
#: Errors after which a record write is tried again: S3's 409 ConditionalRequestConflict
#: (two conditional writes raced; the documented response is to retry) and transient server
#: errors. Bounded, so a failing S3 makes the worker give the message back instead of spinning.
TRANSIENT_CODES = frozenset(
    {
        "ConditionalRequestConflict",
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "500",
        "503",
    }
)
WRITE_RETRIES = 3
WRITE_BACKOFF_S = 0.05
MAX_KNOWN_BLOBS = 10_000
#: How often a reader retries when a blob vanished under it (a writer superseded it).
BLOB_RACE_RETRIES = 2


@dataclass
class RecordStore:
    """The task records of one bucket and prefix.

    Example:
        >>> store = RecordStore(s3_client=boto3.client("s3"), bucket="b")  # doctest: +SKIP
        >>> etag = store.create(TaskRecord(task_id="t1", task_name="research"))  # doctest: +SKIP
    """

    s3_client: S3Client
    bucket: str
    prefix: str = "tasks"
    inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES
    #: the largest state, result or step result accepted, as JSON bytes (None: no limit).
    max_value_bytes: int | None = None
    #: blobs known to exist (key -> reference), so an unchanged large state is neither
    #: compressed nor uploaded again.
    _known_blobs: dict[str, BlobRef] = field(default_factory=dict, repr=False)
    #: per task, the blob keys its record referenced when last read or written here.
    _referenced: dict[str, set[str]] = field(default_factory=dict, repr=False)
    #: size in bytes of the last record written or read (for counters and benchmarks).
    last_record_bytes: int = field(default=0, repr=False)

    def record_key(self, task_id: str) -> str:
        return f"{self.prefix}/{task_id}/{RECORD_NAME}"

    def blob_key(self, task_id: str, digest: str) -> str:
        return f"{self.prefix}/{task_id}/blobs/{digest}.json.gz"

    # -- the record --------------------------------------------------------------------------

    def create(self, record: TaskRecord) -> str:
        """Write a new record; raise RecordExistsError if the task id is taken."""
        body, used = self._encode(record)
        key = self.record_key(record.task_id)
        try:
            response = self._put(key, body, IfNoneMatch="*")
        except ClientError as exc:
            if _code(exc) in ("PreconditionFailed", "412"):
                landed = self._landed(key, body)
                if landed is not None:
                    self._referenced[record.task_id] = used
                    return landed
                raise RecordExistsError("task already exists", task_id=record.task_id) from exc
            raise
        self._referenced[record.task_id] = used
        return str(response["ETag"])

    def load(self, task_id: str) -> tuple[TaskRecord, str]:
        """Read a record and its etag; blobs are fetched and verified."""
        for attempt in range(BLOB_RACE_RETRIES + 1):
            try:
                return self._load(task_id)
            except _BlobGoneError:
                # A writer replaced the record and removed a blob it no longer needs between
                # our two reads: read the newer record.
                if attempt == BLOB_RACE_RETRIES:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _load(self, task_id: str) -> tuple[TaskRecord, str]:
        try:
            response = self.s3_client.get_object(Bucket=self.bucket, Key=self.record_key(task_id))
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise RecordNotFoundError("no record for this task", task_id=task_id) from exc
            raise
        body = response["Body"].read()
        self.last_record_bytes = len(body)
        record = decode_record(
            body, task_id=task_id, get_blob=lambda ref: self._get_blob(task_id, ref)
        )
        self._referenced[task_id] = self._blob_keys(record)
        return record, response["ETag"]

    def replace(self, record: TaskRecord, *, etag: str, finished: bool = False) -> str:
        """Compare-and-swap: write ``record`` only if the stored one still has ``etag``.

        ``finished`` tags the record and its blobs so that a lifecycle rule expires them after
        the retention period.

        Raises:
            RecordConflictError: another writer moved the record (412); this one must stop.
            PayloadTooLargeError: a value is over ``max_value_bytes``; nothing was written.
        """
        record.updated_at = utcnow()
        body, used = self._encode(record, finished=finished)
        extra: dict[str, Any] = {"IfMatch": etag}
        if finished:
            extra["Tagging"] = FINISHED_TAG
        key = self.record_key(record.task_id)
        for attempt in range(WRITE_RETRIES + 1):
            try:
                response = self._put(key, body, **extra)
            except ClientError as exc:
                code = _code(exc)
                if code in ("PreconditionFailed", "412"):
                    landed = self._landed(key, body)
                    if landed is not None:
                        self._forget_superseded(record, used)
                        return landed
                    raise RecordConflictError(
                        "another worker changed the record (412); stopping without writing",
                        task_id=record.task_id,
                        generation=record.generation,
                    ) from exc
                if code in TRANSIENT_CODES and attempt < WRITE_RETRIES:
                    time.sleep(WRITE_BACKOFF_S * 2**attempt)
                    continue
                raise
            self._forget_superseded(record, used)
            return str(response["ETag"])
        raise AssertionError("unreachable")  # pragma: no cover

    def _landed(self, key: str, body: bytes) -> str | None:
        """After a 412: did our own write land (an earlier attempt whose answer was lost)?

        A retried PutObject whose first attempt succeeded finds its own write and answers 412.
        The record's body is unique (it carries ``updated_at``), so if the stored body is ours
        the write happened, and its etag is the new one.
        """
        try:
            response = self.s3_client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        if response["Body"].read() == body:
            return str(response["ETag"])
        return None

    # -- blobs -------------------------------------------------------------------------------

    def _encode(self, record: TaskRecord, *, finished: bool = False) -> tuple[bytes, set[str]]:
        """The record's JSON, and the keys of the blobs it references (uploaded if new)."""
        used: set[str] = set()

        def put_blob(digest: str, data: bytes) -> BlobRef:
            key = self.blob_key(record.task_id, digest)
            used.add(key)
            ref = self._known_blobs.get(key)
            if ref is None:
                if len(self._known_blobs) > MAX_KNOWN_BLOBS:
                    self._known_blobs.clear()  # a long-lived worker must not grow forever
                ref, packed = pack_blob(data, digest)
                extra = {"Tagging": FINISHED_TAG} if finished else {}
                self._put(key, packed, ContentEncoding="gzip", **extra)
                self._known_blobs[key] = ref
            elif finished:
                self.s3_client.put_object_tagging(
                    Bucket=self.bucket, Key=key, Tagging={"TagSet": [_FINISHED_TAG_SET]}
                )
            return ref

        body = encode_record(
            record,
            put_blob=put_blob,
            inline_limit=self.inline_limit,
            max_value_bytes=self.max_value_bytes,
        )
        self.last_record_bytes = len(body)
        return body, used

    def _blob_keys(self, record: TaskRecord) -> set[str]:
        refs = [record.state_ref, record.result_ref, *(e.result_ref for e in record.journal)]
        return {self.blob_key(record.task_id, ref.sha256) for ref in refs if ref is not None}

    def _forget_superseded(self, record: TaskRecord, now: set[str]) -> None:
        """After a write: delete the blobs the previous record used and this one does not.

        In a versioned bucket the delete only hides them: past checkpoints stay readable by
        version until the lifecycle rule for noncurrent versions expires them.
        """
        before = self._referenced.get(record.task_id, set())
        self._referenced[record.task_id] = now
        for key in before - now:
            with contextlib.suppress(ClientError):  # a leftover blob wastes storage, no more
                self.s3_client.delete_object(Bucket=self.bucket, Key=key)
            self._known_blobs.pop(key, None)

    def _get_blob(self, task_id: str, ref: BlobRef) -> bytes:
        key = self.blob_key(task_id, ref.sha256)
        try:
            response = self.s3_client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise _BlobGoneError(
                    f"record points at blob {ref.sha256}, which does not exist", task_id=task_id
                ) from exc
            raise
        self._known_blobs[key] = ref
        data: bytes = response["Body"].read()
        return data

    def _put(self, key: str, body: bytes, **extra: Any) -> Any:
        content_type = "application/json"
        return self.s3_client.put_object(
            Bucket=self.bucket, Key=key, Body=body, ContentType=content_type, **extra
        )


class _BlobGoneError(RecordCorruptError):
    """A blob the record names is missing (a newer write may have removed it)."""


def _refs(record: TaskRecord) -> list[BlobRef]:
    refs = [record.state_ref, record.result_ref, *(e.result_ref for e in record.journal)]
    return [ref for ref in refs if ref is not None]


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
