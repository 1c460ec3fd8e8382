"""What the fan-out tests share: a stand-in for SIGKILL, hooks on the fakes, and a driver that
runs every message in the queue (a parent's and its children's) until nothing is left.

Step executions are counted by the tests themselves (``Counter`` in each app), never taken
from the framework's own counters.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.conftest import StoreFaults, on_backend
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


@contextmanager
def runtime_on(
    where: str, app: Any, budget_s: float = 5.0, **options: Any
) -> Iterator[LocalRuntime]:
    """A local runtime on a virtual clock on backend ``where`` ("memory" or "moto"), on a fresh
    bucket and queue: ``runtime_on(backend, app)`` in a test that takes ``backend``, or a
    backend named per case where moto is slow per call."""
    with on_backend(where):
        yield LocalRuntime(app, budget_s=budget_s, backend=where, virtual_time=True, **options)


def message_of(body: str) -> dict[str, Any]:
    """A continuation body's fields (task_id, kind, reason, ...), unsigned."""
    fields: dict[str, Any] = json.loads(body)
    return fields


@dataclass
class Trap:
    """Where a worker dies, once: at the ``nth`` app write (``put``, matched by key and body)
    or send (by task id and the message's fields) that ``matches``, before the call or right
    after it landed."""

    operation: str  # "put" or "send"
    matches: Callable[[str, dict[str, Any]], bool]
    after: bool = False
    nth: int = 1
    seen: int = 0
    sprung: bool = False

    def fresh(self) -> Trap:
        return Trap(self.operation, self.matches, after=self.after, nth=self.nth)

    def arm(self, app: Any) -> None:
        if self.operation == "put":
            StoreFaults(app).around("put", self._put)
        else:
            queue = app.continuations.queue
            send = queue.send

            def guarded(body: str, *, delay_s: int = 0) -> str:
                return self._fire(
                    message_of(body).get("task_id", ""),
                    message_of(body),
                    lambda: send(body, delay_s=delay_s),
                )

            queue.send = guarded

    def _put(self, call: Callable[..., Any], key: str, body: bytes, **kwargs: Any) -> Any:
        try:
            fields = json.loads(body) if key.endswith(".json") else {}
        except ValueError:
            fields = {}
        return self._fire(
            key, fields if isinstance(fields, dict) else {}, lambda: call(key, body, **kwargs)
        )

    def _fire(self, key: str, fields: dict[str, Any], call: Callable[[], Any]) -> Any:
        if self.sprung or not self.matches(key, fields):
            return call()
        self.seen += 1
        if self.seen < self.nth:
            return call()
        self.sprung = True
        if self.after:
            call()
        raise WorkerDied(f"killed {'after' if self.after else 'before'} {self.operation} {key}")
