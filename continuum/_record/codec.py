"""The record's JSON codec: large values to content-addressed blobs, and back.

A state, result or cursor whose JSON exceeds the inline limit is moved to a gzip-compressed
blob named by the SHA-256 of its JSON; the record keeps a :class:`BlobRef` (digest and sizes)
in its place. A large state's large lists are first cut into segments (``segments.py``), each
a blob of its own, so that a checkpoint uploads only what changed: the record's
``state_segments`` lists them, and the stored state (inline, or in its blob) keeps the rest.
Blobs are written and read in parallel; reading verifies every blob against its digest.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import ValidationError

from continuum._base.json_values import dump_json
from continuum._base.threads import in_parallel
from continuum._record.model import (
    BASE_RECORD_FORMAT,
    RECORD_FORMAT,
    SEGMENTS_RECORD_FORMAT,
    WAITS_RECORD_FORMAT,
    BlobRef,
    EntryKind,
    JournalEntry,
    SegmentedList,
    SegmentRef,
    Status,
    TaskRecord,
    walk,
)
from continuum._record.segments import (
    DEFAULT_SEGMENTING,
    Segmenting,
    cut_state,
    describe_path,
    join_list,
)
from continuum.errors import (
    PayloadTooLargeError,
    RecordCorruptError,
    RecordTooNewError,
    describe_errors,
)

DEFAULT_INLINE_LIMIT_BYTES = 32 * 1024
#: gzip level of blobs: on a 5 MB conversation level 1 takes a quarter of level 6's time for
#: 16% more bytes (benchmarks/checkpoint.py); the save's time counts against the budget.
BLOB_GZIP_LEVEL = 1

#: Threads that write or read one record's blobs at once. boto3's default connection pool
#: holds 10 (more threads open and discard connections). Loading the 5 MB benchmark
#: conversation (55 segments) from a moto server took 0.65-0.92 s on 1 thread, 0.46 s on 4,
#: 0.26-0.34 s on 8 and 0.31-0.38 s on 16 (two runs on a loaded 2-core machine).
BLOB_THREADS = 8

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
        data = self._checked(value, what)
        if len(data) <= self.limit:
            return value, None
        return None, self._put_json(data)

    def state(
        self, value: Any, how: Segmenting | None
    ) -> tuple[Any, BlobRef | None, list[SegmentedList]]:
        """The stored state, its blob and its segmented lists (segments uploaded)."""
        if value is None or how is None:
            return (*self(value, "the state"), [])
        skeleton, cuts, size = cut_state(value, how)
        self._check_size(size, "the state")
        if size <= self.limit:
            return value, None, []
        if not cuts:
            return None, self._put_json(dump_json(value)), []
        segments = [segment for cut in cuts for segment in cut.segments]
        refs = iter(in_parallel(self._put_json, segments, threads=BLOB_THREADS))
        lists = [
            SegmentedList(
                path=list(cut.path), segments=[_segment(next(refs), n) for n in cut.counts]
            )
            for cut in cuts
        ]
        return (*self(skeleton, "the state"), lists)

    def _put_json(self, data: bytes) -> BlobRef:
        return self.put(hashlib.sha256(data).hexdigest(), data)

    def _checked(self, value: Any, what: str) -> bytes:
        data = dump_json(value)
        self._check_size(len(data), what)
        return data

    def _check_size(self, size: int, what: str) -> None:
        if self.most is not None and size > self.most:
            raise PayloadTooLargeError(
                f"{what} is {size} bytes as JSON; the limit is {self.most}",
                task_id=self.task_id,
                hint="keep large data outside the state (e.g. in your own S3 object) and store "
                "a reference, or raise max_state_bytes",
            )


def _segment(ref: BlobRef, items: int) -> SegmentRef:
    return SegmentRef(sha256=ref.sha256, size=ref.size, stored=ref.stored, items=items)


def encode_record(
    record: TaskRecord,
    *,
    put_blob: PutBlob,
    inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES,
    max_value_bytes: int | None = None,
    segmenting: Segmenting | None = DEFAULT_SEGMENTING,
) -> bytes:
    """Serialise a record, moving values over ``inline_limit`` bytes to blobs.

    A state over the limit has its large lists cut into segments first (``segmenting``;
    None: the state goes to one blob). The in-memory record is not changed: it keeps its
    full values. ``put_blob`` may be called from several threads at once.

    Raises:
        PayloadTooLargeError: the state, the result, a step result or a cursor is over
            ``max_value_bytes``.
    """
    out = _Externalizer(put_blob, inline_limit, max_value_bytes, record.task_id)
    stored = record.model_copy(deep=False)
    stored.state, stored.state_ref, stored.state_segments = out.state(record.state, segmenting)
    stored.result, stored.result_ref = out(record.result, "the result")
    stored.journal = [_encode_entry(entry, out) for entry in record.journal]
    if stored.state_segments:
        stored.format = SEGMENTS_RECORD_FORMAT
    else:
        stored.format = WAITS_RECORD_FORMAT if uses_waits(record) else BASE_RECORD_FORMAT
    return stored.model_dump_json(indent=1).encode()


def uses_waits(record: TaskRecord) -> bool:
    """Whether the record holds anything only a worker that knows waits understands."""
    return bool(
        record.status == Status.WAITING
        or record.waiting_for
        or record.callbacks
        or record.signals_taken
        or record.cancel
        or record.children
        or record.parent
        or any(entry.kind != EntryKind.STEP or entry.started for entry in walk(record.journal))
    )


def _encode_entry(entry: JournalEntry, out: _Externalizer) -> JournalEntry:
    result, result_ref = out(entry.result, f"the result of step {entry.key!r}")
    cursor, cursor_ref = out(entry.cursor, f"the cursor of step {entry.key!r}")
    children = None if entry.children is None else [_encode_entry(c, out) for c in entry.children]
    untouched = entry.result_ref is None and entry.cursor_ref is None
    if result_ref is None and cursor_ref is None and untouched and children == entry.children:
        return entry
    return replace(
        entry,
        result=result,
        result_ref=result_ref,
        cursor=cursor,
        cursor_ref=cursor_ref,
        children=children,
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
    """Bring a parsed record's blobs back inline: fetched in parallel, digests verified.

    The refs stay on the record (they say where its values came from). If a blob cannot be
    read, the first error (in the order of ``record.blob_refs()``) is raised once every fetch
    ended, and the record is left as it was.
    """
    tid = record.task_id
    refs = record.blob_refs()
    values = iter(
        in_parallel(
            lambda ref: unpack_blob(ref, get_blob(ref), task_id=tid), refs, threads=BLOB_THREADS
        )
    )
    state = next(values) if record.state_ref is not None else record.state
    result = next(values) if record.result_ref is not None else record.result
    heads = [_items_of(listed, values, tid) for listed in record.state_segments]
    for listed, head in zip(record.state_segments, heads, strict=True):
        try:
            state = join_list(state, listed.path, head)
        except LookupError as exc:
            raise _corrupt(f"the record's state_segments do not fit its state: {exc}", tid) from exc
    record.state, record.result = state, result
    for entry in walk(record.journal):
        if entry.result_ref is not None:
            entry.result = next(values)
        if entry.cursor_ref is not None:
            entry.cursor = next(values)
    return record


def _items_of(listed: SegmentedList, values: Any, task_id: str) -> list[Any]:
    """The items of a segmented list's segments, each checked to be the list it claims."""
    head: list[Any] = []
    for ref in listed.segments:
        items = next(values)
        if type(items) is not list or len(items) != ref.items:
            raise _corrupt(
                f"segment {ref.sha256} of the state's list at {describe_path(listed.path)} "
                f"does not hold the {ref.items} items the record says",
                task_id,
            )
        head.extend(items)
    return head


def describe_blobs(record: TaskRecord) -> dict[str, str]:
    """What each blob of a parsed record holds, by digest, as a person would name it."""
    names: dict[str, str] = {}
    if record.state_ref is not None:
        names[record.state_ref.sha256] = "the state"
    for listed in record.state_segments:
        where = describe_path(listed.path)
        for i, segment in enumerate(listed.segments):
            names[segment.sha256] = (
                f"segment {i + 1} of {len(listed.segments)} of the list at {where}"
            )
    if record.result_ref is not None:
        names[record.result_ref.sha256] = "the task's result"
    for entry in walk(record.journal):
        for kind, blob in (("result", entry.result_ref), ("cursor", entry.cursor_ref)):
            if blob is not None:
                names[blob.sha256] = f"the {kind} of step {entry.key!r}"
    return names


_In = TypeVar("_In")
_Out = TypeVar("_Out")


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
