"""In-memory stand-ins for S3 and SQS, faithful enough to run the whole protocol.

``Continuum(store=InMemoryRecordStore(), queue=InMemoryContinuationQueue())`` runs tasks with
no AWS and no moto. The fakes keep the semantics the protocol relies on, as S3 and SQS (and
moto) show them; the functional tests run against both to prove it:

- the store: conditional writes (``If-None-Match: *`` refuses an existing key, ``If-Match``
  a changed etag, both with PreconditionFailed; ``If-Match`` on a missing key NoSuchKey), etags
  that are the MD5 of the body, versions and delete markers, tags, listing with a delimiter;
- the queue: per-message delays, a visibility timeout per receive, receive counts, a new
  receipt handle per receive, and optionally a dead-letter queue after ``max_receive_count``.

Time comes from an injectable clock (``clock()`` returns epoch seconds), so tests can move it.
Each fake has an ``on_call`` hook, called with the operation's name and key before it runs:
raise from it to inject a fault.
"""

from __future__ import annotations

import fnmatch
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from continuum.queue import MAX_DELAY_S, QueueMessage
from continuum.store import NoSuchKey, ObjectVersion, PreconditionFailed, StoredObject

__all__ = [
    "InMemoryContinuationQueue",
    "InMemoryRecordStore",
    "ManualClock",
]

Clock = Callable[[], float]
Hook = Callable[[str, str], None]


class ManualClock:
    """A clock that moves only when told: ``clock.advance(30)``."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _Version:
    version_id: str
    body: bytes | None  # None: a delete marker
    etag: str
    modified: float
    tags: dict[str, str] = field(default_factory=dict)


class InMemoryRecordStore:
    """A versioned bucket in memory, behind the RecordStore protocol."""

    def __init__(self, *, clock: Clock = time.time, on_call: Hook | None = None) -> None:
        self.clock = clock
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
            self._append(
                key, _Version(uuid.uuid4().hex, body, etag, self.clock(), dict(tags or {}))
            )
            return etag

    def delete(self, key: str) -> None:
        self._hook("delete", key)
        with self._lock:
            if key in self._objects:
                self._append(key, _Version(uuid.uuid4().hex, None, "", self.clock()))

    def tag(self, key: str, tags: Mapping[str, str]) -> None:
        self._hook("tag", key)
        with self._lock:
            current = self._find(key, None)
            if current is None or current.body is None:
                raise NoSuchKey(key)
            current.tags = dict(tags)

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
        found: dict[str, None] = {}
        for key in keys:
            rest = key[len(prefix) :]
            cut = rest.find(delimiter)
            found[key if cut < 0 else prefix + rest[: cut + len(delimiter)]] = None
        return list(found)

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


@dataclass
class _Message:
    message_id: str
    body: str
    visible_at: float
    receive_count: int = 0
    receipt_handle: str | None = None


class InMemoryContinuationQueue:
    """An SQS standard queue in memory, behind the ContinuationQueue protocol.

    Args:
        clock: epoch seconds (default: the real clock).
        visibility_timeout_s: how long a received message stays hidden.
        max_receive_count: with ``dead_letter``, a message received more often moves there.
        dead_letter: the dead-letter queue.
        on_call: a fault hook, called with ``(operation, message id or "")``.
    """

    def __init__(
        self,
        *,
        clock: Clock = time.time,
        visibility_timeout_s: float = 30.0,
        max_receive_count: int | None = None,
        dead_letter: InMemoryContinuationQueue | None = None,
        on_call: Hook | None = None,
    ) -> None:
        self.clock = clock
        self.visibility_timeout_s = visibility_timeout_s
        self.max_receive_count = max_receive_count
        self.dead_letter = dead_letter
        self.on_call = on_call
        self._messages: list[_Message] = []
        self._lock = threading.Condition()

    def send(self, body: str, *, delay_s: int = 0) -> str:
        self._hook("send", "")
        delay = max(0, min(MAX_DELAY_S, int(delay_s)))
        message = _Message(uuid.uuid4().hex, body, self.clock() + delay)
        with self._lock:
            self._messages.append(message)
            self._lock.notify_all()
        return message.message_id

    def set_visibility(self, receipt_handle: str, seconds: int) -> None:
        self._hook("set_visibility", receipt_handle)
        with self._lock:
            message = self._by_receipt(receipt_handle)
            if message is not None:
                message.visible_at = self.clock() + max(0, seconds)

    def receive(self, *, max_messages: int = 1, wait_s: int = 0) -> list[QueueMessage]:
        self._hook("receive", "")
        deadline = time.monotonic() + wait_s
        with self._lock:
            while True:
                got = self._take(max_messages)
                if got or time.monotonic() >= deadline or self.clock is not time.time:
                    return got
                self._lock.wait(timeout=min(0.05, max(0.0, deadline - time.monotonic())))

    def delete(self, receipt_handle: str) -> None:
        self._hook("delete", receipt_handle)
        with self._lock:
            message = self._by_receipt(receipt_handle)
            if message is not None:
                self._messages.remove(message)

    # -- for tests -----------------------------------------------------------------------------

    def __len__(self) -> int:
        """Messages in the queue, visible or not."""
        with self._lock:
            return len(self._messages)

    def bodies(self) -> list[str]:
        """The bodies of every message in the queue, visible or not, oldest first."""
        with self._lock:
            return [m.body for m in self._messages]

    def next_visible_at(self) -> float | None:
        """When the next message becomes visible (None: the queue is empty)."""
        with self._lock:
            return min((m.visible_at for m in self._messages), default=None)

    def _take(self, most: int) -> list[QueueMessage]:
        now = self.clock()
        got: list[QueueMessage] = []
        for message in list(self._messages):
            if len(got) >= most:
                break
            if message.visible_at > now:
                continue
            if (
                self.dead_letter is not None
                and self.max_receive_count is not None
                and message.receive_count >= self.max_receive_count
            ):
                self._messages.remove(message)
                self.dead_letter._adopt(message)
                continue
            message.receive_count += 1
            message.receipt_handle = uuid.uuid4().hex
            message.visible_at = now + self.visibility_timeout_s
            got.append(
                QueueMessage(
                    body=message.body,
                    message_id=message.message_id,
                    receipt_handle=message.receipt_handle,
                    receive_count=message.receive_count,
                )
            )
        return got

    def _adopt(self, message: _Message) -> None:
        with self._lock:
            self._messages.append(
                _Message(message.message_id, message.body, self.clock(), message.receive_count)
            )

    def _by_receipt(self, receipt_handle: str) -> _Message | None:
        return next((m for m in self._messages if m.receipt_handle == receipt_handle), None)

    def _hook(self, operation: str, key: str) -> None:
        if self.on_call is not None:
            self.on_call(operation, key)
