"""Counting the AWS calls the framework makes, on moto's boto3 clients or on the fakes.

The local runtime and the benchmarks report the S3 and SQS calls a task cost; both backends
count alike: a boto3 client through its ``after-call`` events, a fake through its ``on_call``
hook (each fake operation stands for the S3 or SQS operation named below).
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from continuum._record.history import Usage

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

#: The EventBridge Scheduler operation each in-memory scheduler call stands for.
SCHEDULER_NAMES = {
    "schedule_at": "CreateSchedule",
    "put_recurring": "CreateSchedule",
    "pause": "UpdateSchedule",
    "resume": "UpdateSchedule",
    "get": "GetSchedule",
    "schedules": "ListSchedules",
    "delete": "DeleteSchedule",
}
_NAMES = {"s3": S3_NAMES, "sqs": SQS_NAMES, "scheduler": SCHEDULER_NAMES}


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
        """An ``on_call`` hook for a fake of ``service`` ("s3", "sqs" or "scheduler") that
        counts its calls, except while ``quiet.on`` is set in the calling thread."""
        names = _NAMES[service]

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


class Meter:
    """Counts a worker's store and queue calls per message, for ``record.usage``: in the
    context that handles the message, and in the pool threads it hands work to (they run in
    a copy of it: ``pools.in_parallel``).

    Example:
        >>> meter = Meter()
        >>> store = meter.wrap(InMemoryRecordStore())  # doctest: +SKIP
        >>> usage = meter.start()  # before handling a message  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar(
            f"continuum_usage_{id(self)}", default=None
        )
        self._lock = threading.Lock()  # pool threads count into their caller's Usage

    def start(self) -> Usage:
        """Count this context's calls from now into a fresh Usage, and return it."""
        usage = Usage()
        self._usage.set(usage)
        return usage

    def count(self, field: str) -> None:
        """One more call billed as ``field`` (a Usage field) in this context, if counting."""
        usage = self._usage.get()
        if usage is not None:
            with self._lock:
                setattr(usage, field, getattr(usage, field) + 1)

    def wrap(self, inner: Any) -> Any:
        """A view of a store or a queue whose calls this meter counts."""
        if hasattr(inner, "send"):
            return MeteredQueue(inner, self)
        return MeteredStore(inner, self)


class _Metered:
    """What a metered view does not count, it forwards as it is (``max_delay_s``, receive)."""

    def __init__(self, inner: Any, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _counted(operation: str, field: str) -> Callable[..., Any]:
    """A method that counts one call as ``field``, then calls the inner ``operation``, looked
    up at each call (a fake's method replaced after wrapping, by a fault injector, is the one
    called)."""

    def call(self: _Metered, *args: Any, **kwargs: Any) -> Any:
        self._meter.count(field)
        return getattr(self._inner, operation)(*args, **kwargs)

    call.__name__ = call.__qualname__ = operation
    return call


class MeteredStore(_Metered):
    """A RecordStore whose calls a Meter counts."""

    get = _counted("get", "s3_get")
    put = _counted("put", "s3_put")
    delete = _counted("delete", "s3_delete")
    tag = _counted("tag", "s3_tag")
    tags = _counted("tags", "s3_get")  # GetObjectTagging is billed as a GET
    list_keys = _counted("list_keys", "s3_list")
    versions = _counted("versions", "s3_list")


class MeteredQueue(_Metered):
    """A ContinuationQueue whose sends and visibility changes a Meter counts (the event
    source's receives and deletes are counted per message, as ``sqs_receives``)."""

    send = _counted("send", "sqs_send")
    set_visibility = _counted("set_visibility", "sqs_visibility")
