"""Counting the AWS calls the framework makes, on moto's boto3 clients or on the fakes.

The local runtime and the benchmarks report the S3 and SQS calls a task cost; both backends
count alike: a boto3 client through its ``after-call`` events, a fake through its ``on_call``
hook (each fake operation stands for the S3 or SQS operation named below).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from continuum.history import Usage

#: The S3 and SQS operation each in-memory call stands for, so both backends count alike.
S3_NAMES = {
    "get": "GetObject",
    "put": "PutObject",
    "delete": "DeleteObject",
    "tag": "PutObjectTagging",
    "tags": "GetObjectTagging",
    "list": "ListObjectsV2",
    "versions": "ListObjectVersions",
}
SQS_NAMES = {
    "send": "SendMessage",
    "set_visibility": "ChangeMessageVisibility",
    "receive": "ReceiveMessage",
    "delete": "DeleteMessage",
}


class CallCounter:
    """Counts the AWS API calls (or their in-memory equivalents) the framework makes."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()  # blobs are fetched from pool threads

    def attach(self, client: Any) -> None:
        """Count the calls of a boto3 client."""
        client.meta.events.register("after-call", self._count)

    def _count(self, event_name: str, **_kwargs: Any) -> None:
        # event_name is "after-call.<service>.<Operation>"
        _hook, service, operation = event_name.split(".", 2)
        with self._lock:
            self.calls[f"{service}:{operation}"] += 1

    def total(self, service: str) -> int:
        return sum(n for key, n in self.calls.items() if key.startswith(f"{service}:"))

    def hook(self, service: str, quiet: threading.local) -> Callable[[str, str], None]:
        """An ``on_call`` hook for a fake of ``service`` ("s3" or "sqs") that counts its calls,
        except while ``quiet.on`` is set in the calling thread."""
        names = S3_NAMES if service == "s3" else SQS_NAMES

        def count(operation: str, _key: str) -> None:
            if not getattr(quiet, "on", False):
                with self._lock:
                    self.calls[f"{service}:{names[operation]}"] += 1

        return count


class Uncounted:
    """A view of a fake whose calls the runtime's counter skips (the runtime's own calls)."""

    def __init__(self, fake: Any, quiet: threading.local) -> None:
        self._fake = fake
        self._quiet = quiet

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._fake, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            self._quiet.on = True
            try:
                return method(*args, **kwargs)
            finally:
                self._quiet.on = False

        return call


#: Which Usage field each store and queue operation counts in.
_USAGE_FIELDS = {
    "get": "s3_get",
    "put": "s3_put",
    "list_keys": "s3_list",
    "versions": "s3_list",
    "delete": "s3_delete",
    "tag": "s3_tag",
    "tags": "s3_get",  # GetObjectTagging is billed as a GET
    "send": "sqs_send",
    "set_visibility": "sqs_visibility",
}


class Meter:
    """Counts a worker's store and queue calls per message (per thread), for ``record.usage``.

    Example:
        >>> meter = Meter()
        >>> store = meter.wrap(InMemoryRecordStore())  # doctest: +SKIP
        >>> usage = meter.start()  # before handling a message  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def start(self) -> Usage:
        """Count this thread's calls from now into a fresh Usage, and return it."""
        usage = Usage()
        self._local.usage = usage
        return usage

    def count(self, operation: str) -> None:
        usage = getattr(self._local, "usage", None)
        name = _USAGE_FIELDS.get(operation)
        if usage is not None and name is not None:
            setattr(usage, name, getattr(usage, name) + 1)

    def wrap(self, fake: Any) -> Any:
        """A view of a store or a queue whose calls this meter counts."""
        return Metered(fake, self)


class Metered:
    """A RecordStore or ContinuationQueue whose calls a Meter counts."""

    def __init__(self, inner: Any, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name not in _USAGE_FIELDS:
            return value
        meter = self._meter

        def call(*args: Any, **kwargs: Any) -> Any:
            meter.count(name)
            return value(*args, **kwargs)

        return call
