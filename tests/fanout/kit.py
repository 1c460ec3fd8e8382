"""What the fan-out tests share: a stand-in for SIGKILL, hooks on the fakes, and a driver that
runs every message in the queue (a parent's and its children's) until nothing is left.

Step executions are counted by the tests themselves (``Counter`` in each app), never taken
from the framework's own counters.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support import LocalRuntime, TaskRecord


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process: nothing in the framework catches it."""


def chain(fake: Any, hook: Callable[[str, str], None]) -> None:
    """Call ``hook(operation, key)`` before every call of an in-memory fake, then its own."""
    before = fake.on_call

    def both(operation: str, key: str) -> None:
        hook(operation, key)
        if before is not None:
            before(operation, key)

    fake.on_call = both


def record_key(task_id: str) -> str:
    return f"tasks/{task_id}/record.json"


@contextmanager
def counting_puts(runtime: LocalRuntime) -> Iterator[Counter[str]]:
    """Count the worker's PUTs per key of the in-memory store (the runtime's own reads and
    the test's client calls are not PUTs of a record, except ``start`` and ``cancel``)."""
    puts: Counter[str] = Counter()
    lock = threading.Lock()

    def count(operation: str, key: str) -> None:
        if operation == "put":
            with lock:
                puts[key] += 1

    chain(runtime.store, count)
    yield puts


def settle(
    runtime: LocalRuntime,
    *,
    limit: int = 2000,
    on_death: Callable[[], None] | None = None,
    context: Callable[[], Any] | None = None,
) -> int:
    """Run every message (jumping the virtual clock to the next due one) until the queue is
    empty; a worker that dies leaves its message to come back after its visibility timeout.
    Returns how many invocations died."""
    deaths = 0
    for _ in range(limit):
        try:
            handled = runtime.invoke_once(context() if context is not None else None)
        except WorkerDied:
            deaths += 1
            if on_death is not None:
                on_death()
            runtime.time.advance(runtime.visibility_timeout_s + 1)
            continue
        if handled is None:
            due = runtime.next_due()
            if due is None:
                return deaths
            runtime.time.wait_until(due, poll_s=0.01)
    raise AssertionError(f"the queue was not empty after {limit} invocations")


def children_of(runtime: LocalRuntime, parent_id: str) -> list[TaskRecord]:
    """The records of every child the parent's record names, in id order."""
    record = runtime.record(parent_id)
    return [runtime.record(child) for batch in record.children for child in batch.ids()]
