"""The record store: where records, blobs and inbox objects live, as bytes under keys.

:class:`RecordStore` is the one seam to storage. Its semantics are S3's, conditional writes
included: ``put(..., if_none_match=True)`` creates only if the key is free and
``put(..., if_match=etag)`` replaces only if the stored object still has that etag; a lost
condition raises :class:`PreconditionFailed` (S3's 412). ``s3.S3RecordStore`` implements it on
a bucket; ``memory.InMemoryRecordStore`` in memory. It is the blob store: the record-level
seam above it (``continuum._record.persistence.Records``: load, create, swap, inbox, history,
sweep) is implemented on it once, by ``continuum._record.blob_records``, the only code that
knows its keys, etags, tags and versions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple, Protocol

#: Transient store errors are tried again this often, with this backoff doubling from here.
WRITE_RETRIES = 3
WRITE_BACKOFF_S = 0.05


class StoreError(Exception):
    """A store operation failed for a reason other than those below (access denied, ...)."""


class PreconditionFailed(StoreError):
    """A conditional write lost (S3 412): the object exists, or its etag changed."""


class NoSuchKey(StoreError):
    """The object (or the version) does not exist."""


class TransientStoreError(StoreError):
    """Worth trying again: S3's 409 ConditionalRequestConflict, a 5xx, throttling."""


class StoredObject(NamedTuple):
    """An object as read: its bytes, its etag and (in a versioned bucket) its version."""

    body: bytes
    etag: str
    version_id: str | None = None


class ObjectVersion(NamedTuple):
    """One stored version of a key (bucket versioning)."""

    version_id: str
    is_latest: bool
    last_modified: datetime
    is_delete_marker: bool = False
    etag: str | None = None


class RecordStore(Protocol):
    """Bytes under keys, with S3's conditional writes, tags and versions."""

    def get(self, key: str, *, version_id: str | None = None) -> StoredObject:
        """Read an object (or one of its versions). Raises NoSuchKey."""
        ...

    def put(
        self,
        key: str,
        body: bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        tags: Mapping[str, str] | None = None,
        content_encoding: str | None = None,
    ) -> str:
        """Write an object; return its new etag. Raises PreconditionFailed."""
        ...

    def delete(self, key: str) -> None:
        """Delete an object (in a versioned bucket: hide it behind a delete marker)."""
        ...

    def tag(self, key: str, tags: Mapping[str, str]) -> None:
        """Replace an object's tags. Raises NoSuchKey."""
        ...

    def tags(self, key: str) -> dict[str, str]:
        """An object's tags (S3's GetObjectTagging; empty if it has none). Raises NoSuchKey.

        One read, for a message of a finished task: a record tagged finished was swept.
        """
        ...

    def list_keys(self, prefix: str, *, delimiter: str | None = None) -> list[str]:
        """Keys under ``prefix``; with a delimiter, the common prefixes ("folders") too."""
        ...

    def versions(self, key: str) -> list[ObjectVersion]:
        """Every stored version of ``key``, newest first (empty without versioning)."""
        ...


def put_with_retries(
    store: RecordStore,
    key: str,
    body: bytes,
    *,
    if_match: str | None = None,
    if_none_match: bool = False,
    content_encoding: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """``store.put``, tried again on transient errors (S3's 409, 5xx, throttling)."""
    for attempt in range(WRITE_RETRIES + 1):
        try:
            return store.put(
                key,
                body,
                if_match=if_match,
                if_none_match=if_none_match,
                content_encoding=content_encoding,
                tags=tags,
            )
        except TransientStoreError:
            if attempt == WRITE_RETRIES:
                raise
            time.sleep(WRITE_BACKOFF_S * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover
