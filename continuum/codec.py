"""The record's JSON codec: large values to content-addressed blobs, and back.

A state, result or cursor whose JSON exceeds the inline limit is moved to a gzip-compressed
blob named by the SHA-256 of its JSON; the record keeps a :class:`BlobRef` (digest and sizes)
in its place. Reading verifies every blob against its digest.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from continuum.errors import (
    PayloadTooLargeError,
    RecordCorruptError,
    RecordTooNewError,
    describe_errors,
)
from continuum.record import BASE_RECORD_FORMAT, RECORD_FORMAT, BlobRef, JournalEntry, TaskRecord
from continuum.values import dump_json

DEFAULT_INLINE_LIMIT_BYTES = 32 * 1024
#: gzip level of blobs: on a 5 MB conversation level 1 takes a quarter of level 6's time for
#: 16% more bytes (benchmarks/checkpoint.py); the save's time counts against the budget.
BLOB_GZIP_LEVEL = 1

#: Stores the JSON ``data`` whose SHA-256 is ``digest`` as a blob; returns its reference.
PutBlob = Callable[[str, bytes], BlobRef]
#: Reads the packed bytes of a blob.
GetBlob = Callable[[BlobRef], bytes]


def pack_blob(data: bytes, digest: str | None = None) -> tuple[BlobRef, bytes]:
    """Compress a JSON payload and name it by the SHA-256 of its uncompressed bytes."""
    packed = gzip.compress(data, compresslevel=BLOB_GZIP_LEVEL, mtime=0)
    digest = digest or hashlib.sha256(data).hexdigest()
    return BlobRef(sha256=digest, size=len(data), stored=len(packed)), packed


def unpack_blob(ref: BlobRef, packed: bytes, *, task_id: str) -> Any:
    """Decompress a blob, verify its digest, and parse it."""
    try:
        data = gzip.decompress(packed)
    except (OSError, EOFError) as exc:
        raise RecordCorruptError(f"blob {ref.sha256} is not valid gzip", task_id=task_id) from exc
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise RecordCorruptError(f"blob {ref.sha256} does not match its digest", task_id=task_id)
    return json.loads(data)


class _Externalizer:
    def __init__(self, put: PutBlob, limit: int, most: int | None, task_id: str) -> None:
        self.put, self.limit, self.most, self.task_id = put, limit, most, task_id

    def __call__(self, value: Any, what: str) -> tuple[Any, BlobRef | None]:
        if value is None:
            return None, None
        data = dump_json(value)
        if self.most is not None and len(data) > self.most:
            raise PayloadTooLargeError(
                f"{what} is {len(data)} bytes as JSON; the limit is {self.most}",
                task_id=self.task_id,
                hint="keep large data outside the state (e.g. in your own S3 object) and store "
                "a reference, or raise max_state_bytes",
            )
        if len(data) <= self.limit:
            return value, None
        return None, self.put(hashlib.sha256(data).hexdigest(), data)


def encode_record(
    record: TaskRecord,
    *,
    put_blob: PutBlob,
    inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES,
    max_value_bytes: int | None = None,
) -> bytes:
    """Serialise a record, moving values over ``inline_limit`` bytes to blobs.

    The in-memory record is not changed: it keeps its full values.

    Raises:
        PayloadTooLargeError: the state, the result, a step result or a cursor is over
            ``max_value_bytes``.
    """
    out = _Externalizer(put_blob, inline_limit, max_value_bytes, record.task_id)
    stored = record.model_copy(deep=False)
    stored.format = RECORD_FORMAT if record.uses_waits() else BASE_RECORD_FORMAT
    stored.state, stored.state_ref = out(record.state, "the state")
    stored.result, stored.result_ref = out(record.result, "the result")
    stored.journal = [_encode_entry(entry, out) for entry in record.journal]
    return stored.model_dump_json(indent=1).encode()


def _encode_entry(entry: JournalEntry, out: _Externalizer) -> JournalEntry:
    result, result_ref = out(entry.result, f"the result of step {entry.key!r}")
    cursor, cursor_ref = out(entry.cursor, f"the cursor of step {entry.key!r}")
    untouched = entry.result_ref is None and entry.cursor_ref is None
    if result_ref is None and cursor_ref is None and untouched:
        return entry
    return replace(
        entry, result=result, result_ref=result_ref, cursor=cursor, cursor_ref=cursor_ref
    )


def parse_record(data: bytes, *, task_id: str) -> TaskRecord:
    """Parse a stored record without its blobs (the refs stay in place of the values)."""
    try:
        head = json.loads(data)
    except ValueError as exc:
        raise _corrupt(f"record does not parse: not JSON: {exc}", task_id) from exc
    version = head.get("format") if isinstance(head, dict) else None
    if isinstance(version, int) and version > RECORD_FORMAT:
        raise RecordTooNewError(
            f"record format {version} is newer than this worker's ({RECORD_FORMAT})",
            task_id=task_id,
            hint="a newer continuum wrote it: deploy that version everywhere; this worker "
            "leaves the record untouched",
        )
    try:
        record = TaskRecord.model_validate(head)
    except ValidationError as exc:
        raise _corrupt(f"record does not parse: {describe_errors(exc)}", task_id) from exc
    if record.task_id != task_id:
        raise RecordCorruptError(
            f"record names task {record.task_id!r}, but is stored under {task_id!r}",
            task_id=task_id,
        )
    return record


def inline_blobs(record: TaskRecord, get_blob: GetBlob) -> TaskRecord:
    """Bring a parsed record's blobs back inline (digests verified)."""
    tid = record.task_id
    if record.state_ref is not None:
        record.state = unpack_blob(record.state_ref, get_blob(record.state_ref), task_id=tid)
    if record.result_ref is not None:
        record.result = unpack_blob(record.result_ref, get_blob(record.result_ref), task_id=tid)
    for entry in record.journal:
        if entry.result_ref is not None:
            entry.result = unpack_blob(entry.result_ref, get_blob(entry.result_ref), task_id=tid)
        if entry.cursor_ref is not None:
            entry.cursor = unpack_blob(entry.cursor_ref, get_blob(entry.cursor_ref), task_id=tid)
    return record


def _corrupt(message: str, task_id: str) -> RecordCorruptError:
    return RecordCorruptError(
        message,
        task_id=task_id,
        hint="restore an earlier version of the record (bucket versioning keeps them), "
        "then run `continuum resume TASK_ID`",
    )


def decode_record(data: bytes, *, task_id: str, get_blob: GetBlob) -> TaskRecord:
    """Parse a stored record and inline its blobs (what ``Records.load`` does after its GET)."""
    return inline_blobs(parse_record(data, task_id=task_id), get_blob)
