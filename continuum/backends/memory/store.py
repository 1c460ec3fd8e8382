"""An S3 bucket in memory, behind the RecordStore protocol (see ``continuum.testing``)."""

from __future__ import annotations

import fnmatch
import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from continuum.backends.memory.clock import Clock, Hook, new_id, wall_clock
from continuum.backends.store import NoSuchKey, ObjectVersion, PreconditionFailed, StoredObject


@dataclass
class _Version:
    version_id: str
    body: bytes | None  # None: a delete marker
    etag: str
    modified: float
    tags: dict[str, str] = field(default_factory=dict)


class InMemoryRecordStore:
    """A versioned bucket in memory, behind the RecordStore protocol."""

    def __init__(self, *, clock: Clock | None = None, on_call: Hook | None = None) -> None:
        self.clock = clock or wall_clock
        self.on_call = on_call
        self._objects: dict[str, list[_Version]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, *, version_id: str | None = None) -> StoredObject:
        self._hook("get", key)
        with self._lock:
            version = self._find(key, version_id)
            if version is None or version.body is None:
                raise NoSuchKey(key)
            return StoredObject(body=version.body, etag=version.etag, version_id=version.version_id)

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
        self._hook("put", key)
        body = bytes(body)
        with self._lock:
            current = self._find(key, None)
            live = current is not None and current.body is not None
            if if_none_match and live:
                raise PreconditionFailed(key)
            if if_match is not None:
                if not live:
                    raise NoSuchKey(key)
                assert current is not None
                if current.etag != if_match:
                    raise PreconditionFailed(key)
            etag = f'"{hashlib.md5(body).hexdigest()}"'  # noqa: S324 - S3's own etag
            self._append(key, _Version(new_id(), body, etag, self.clock(), dict(tags or {})))
            return etag

    def delete(self, key: str) -> None:
        self._hook("delete", key)
        with self._lock:
            if key in self._objects:
                self._append(key, _Version(new_id(), None, "", self.clock()))

    def tag(self, key: str, tags: Mapping[str, str]) -> None:
        self._hook("tag", key)
        with self._lock:
            current = self._find(key, None)
            if current is None or current.body is None:
                raise NoSuchKey(key)
            current.tags = dict(tags)

    def tags(self, key: str) -> dict[str, str]:
        self._hook("tags", key)
        with self._lock:
            current = self._find(key, None)
            if current is None or current.body is None:
                raise NoSuchKey(key)
            return dict(current.tags)

    def list_keys(self, prefix: str, *, delimiter: str | None = None) -> list[str]:
        self._hook("list", prefix)
        with self._lock:
            keys = sorted(
                k
                for k, vs in self._objects.items()
                if k.startswith(prefix) and vs[-1].body is not None
            )
        if not delimiter:
            return keys
        contents: list[str] = []
        folders: dict[str, None] = {}
        for key in keys:
            cut = key.find(delimiter, len(prefix))
            if cut < 0:
                contents.append(key)
            else:
                folders[key[: cut + len(delimiter)]] = None
        return contents + list(folders)  # as S3 answers: the keys, then the common prefixes

    def versions(self, key: str) -> list[ObjectVersion]:
        self._hook("versions", key)
        with self._lock:
            history = list(self._objects.get(key, []))
        return [
            ObjectVersion(
                version_id=v.version_id,
                is_latest=i == len(history) - 1,
                last_modified=datetime.fromtimestamp(v.modified, UTC),
                is_delete_marker=v.body is None,
                etag=v.etag or None,
            )
            for i, v in reversed(list(enumerate(history)))
        ]

    # -- for tests -----------------------------------------------------------------------------

    def tags_of(self, key: str) -> dict[str, str]:
        """The tags of the current version of ``key`` (empty if none or missing)."""
        with self._lock:
            current = self._find(key, None)
            return dict(current.tags) if current is not None else {}

    def live_keys(self, pattern: str = "*") -> list[str]:
        """The live keys matching a glob pattern."""
        with self._lock:
            return sorted(
                k
                for k, vs in self._objects.items()
                if vs[-1].body is not None and fnmatch.fnmatchcase(k, pattern)
            )

    def _find(self, key: str, version_id: str | None) -> _Version | None:
        history = self._objects.get(key)
        if not history:
            return None
        if version_id is None:
            return history[-1]
        return next((v for v in history if v.version_id == version_id), None)

    def _append(self, key: str, version: _Version) -> None:
        self._objects.setdefault(key, []).append(version)

    def _hook(self, operation: str, key: str) -> None:
        if self.on_call is not None:
            self.on_call(operation, key)
