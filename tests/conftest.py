"""Shared fixtures: the two backends (moto in-process and continuum.testing's in-memory fakes),
Lambda contexts whose deadline a test controls, and backend-neutral looks at the stored objects
and faults to inject.

One way runs a test on both backends: take the ``backend`` fixture, directly or through one
that needs it, and the test runs twice, ``[memory]`` and ``[moto]`` (the same protocol on
both proves the fakes faithful). ``@pytest.mark.moto_only(reason)`` keeps it on moto where it
needs boto3 itself. Built on ``backend``:

- ``aws``: the backend's S3 and SQS for the whole test:
  ``LocalRuntime(app, budget_s=..., backend=aws)``;
- ``make_runtime``: ``make_runtime(app, budget_s=5)``, a local runtime on a virtual clock;
- ``on_backend(backend)``: a context manager, for a test that makes a fresh bucket and queue
  per block (``tests/fanout/kit.py``'s ``runtime_on`` is it, with a virtual-clock runtime).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from continuum import Continuum
from continuum._local.virtual_time import give_fake_dates_their_schemas
from tests.support import (
    BUCKET,
    REGION,
    LocalRuntime,
    PreconditionFailed,
    QueueError,
    StoreError,
    TransientStoreError,
    event_record,
    moto_backend,
    pack_blob,
)

# Tests that freeze time themselves (freeze_time, not a VirtualTime) may be the first to build a
# model's schema in their process: whichever test an xdist worker happens to run first.
give_fake_dates_their_schemas()

# boto3 must never reach a real account from a test.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"

#: The backends a protocol test runs on (LocalRuntime's ``backend``).
BACKENDS = ("memory", "moto")
TESTS = Path(__file__).resolve().parent
#: Suites whose session fixtures are costly (the timeline's lived tasks, the docs' installed
#: wheel): under pytest-xdist each runs on one worker, which makes them once.
ONE_WORKER_SUITES = {"timeline", "docs"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` a file's tests share a worker (and its module fixtures), and
    so does each of ONE_WORKER_SUITES."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        group = parts[0] if parts[0] in ONE_WORKER_SUITES else "/".join(parts)
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``backend`` (``aws`` does) on each backend, unless moto_only."""
    if "backend" not in metafunc.fixturenames:
        return
    moto_only = metafunc.definition.get_closest_marker("moto_only")
    if moto_only is not None and not (moto_only.args or moto_only.kwargs.get("reason")):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: moto_only needs a reason")
    metafunc.parametrize("backend", ["moto"] if moto_only else BACKENDS, indirect=True)


@pytest.fixture(autouse=True)
def _close_the_event_loop_left_set() -> Iterator[None]:
    """Close the event loop a test left set on its thread: pydantic-ai's ``run_sync`` sets one
    and keeps it, a later ``asyncio.run`` drops it unclosed, and the garbage collector's
    ResourceWarning then fails whichever test of the worker runs when it collects."""
    yield
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    if loop is not None and not loop.is_running():
        if not loop.is_closed():
            loop.close()
        asyncio.set_event_loop(None)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend this run of the test uses: "memory" or "moto"."""
    return str(request.param)


@contextlib.contextmanager
def on_backend(backend: str) -> Iterator[str]:
    """Run the block where ``LocalRuntime(..., backend=backend)`` works: inside moto for moto."""
    with moto_backend() if backend == "moto" else contextlib.nullcontext():
        yield backend


@pytest.fixture
def aws(backend: str) -> Iterator[str]:
    """The backend's S3 and SQS for the test: ``LocalRuntime(app, budget_s=..., backend=aws)``."""
    with on_backend(backend):
        yield backend


@pytest.fixture
def make_runtime(aws: str) -> Callable[..., LocalRuntime]:
    """``make_runtime(app, budget_s=5)``: a local runtime on a virtual clock, on the backend."""

    def make(app: Continuum, budget_s: float = 5.0, **options: Any) -> LocalRuntime:
        return LocalRuntime(app, budget_s=budget_s, backend=aws, virtual_time=True, **options)

    return make


class ScriptedContext:
    """A Lambda context with plenty of time until ``allowed`` more live steps have run.

    ``executed`` returns how many live step calls the test's steps have made in total. The
    first look at the clock (the claim) always sees the full budget, so the record learns
    what a fresh invocation has.
    """

    def __init__(self, allowed: int | None, executed: Callable[[], int], budget_s: float = 900):
        self.allowed = allowed
        self.executed = executed
        self.start = executed()
        self.budget_ms = int(budget_s * 1000)
        self.aws_request_id = "scripted"
        self.function_name = "scripted"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:scripted"

    def get_remaining_time_in_millis(self) -> int:
        if self.allowed is None or self.executed() - self.start < self.allowed:
            return self.budget_ms
        return 0


def drain(runtime: LocalRuntime, task_id: str, contexts: Callable[[int], Any], limit: int = 200):
    """Invoke until the task finishes; ``contexts(i)`` gives the i-th invocation's context.

    When no message is visible, a runtime on virtual time jumps to the next one due (a
    delayed continuation: a backoff, a timer), as ``LocalRuntime.drive`` does.
    """
    with runtime.time.running():
        for i in range(limit):
            if runtime.record(task_id).status.finished:
                return runtime.record(task_id)
            context = contexts(i)
            while runtime.invoke_once(context) is None:
                _jump_to_next_due(runtime, task_id)
    raise AssertionError("task did not finish")


def _jump_to_next_due(runtime: LocalRuntime, task_id: str) -> None:
    due = runtime.next_due()
    if due is None:
        raise AssertionError(f"no message waiting for unfinished task {task_id}")
    if not runtime.time.virtual:
        raise AssertionError(
            f"no message visible for unfinished task {task_id}: the next is due in "
            f"{due - time.time():.1f}s; make the runtime with virtual_time=True for drain "
            "to jump to it"
        )
    runtime.time.wait_until(due, poll_s=0)


EVENTS = os.path.join(os.path.dirname(__file__), "events")


def sqs_event(*bodies: str, message_ids: list[str] | None = None, receipt: str | None = None):
    """An SQS batch event as Lambda delivers it (from tests/events/sqs_continuation.json)."""
    import copy
    import json

    with open(os.path.join(EVENTS, "sqs_continuation.json")) as f:
        template = json.load(f)["Records"][0]
    records = []
    for i, body in enumerate(bodies):
        record = copy.deepcopy(template)
        record["body"] = body
        record["messageId"] = message_ids[i] if message_ids else f"message-{i}"
        if receipt is not None:
            record["receiptHandle"] = receipt
        records.append(record)
    return {"Records": records}


def continuation(task_id: str, generation: int, reason: str = "test") -> str:
    from tests.support import Continuation, encode_message

    return encode_message(
        Continuation(task_id=task_id, generation=generation, reason=reason, sent_at=0.0)
    )


def snapshot_objects(runtime: LocalRuntime) -> dict[str, str]:
    """Every live object in the bucket: key -> etag (to prove nothing changed)."""
    store = runtime.observer_store
    return {key: store.get(key).etag for key in store.list_keys("")}


class Blobs(dict):
    """Blobs in a dict, digest -> packed bytes: ``put_blob`` and ``get_blob`` for the codec."""

    def put(self, digest: str, data: bytes) -> Any:
        ref, packed = pack_blob(data, digest)
        self[digest] = packed
        return ref

    def get(self, ref: Any) -> bytes:
        return bytes(self[ref.sha256])


# -- the stored objects, on either backend ----------------------------------------------------


def record_key(task_id: str) -> str:
    return f"tasks/{task_id}/record.json"


def raw_record(runtime: LocalRuntime, task_id: str, version_id: str | None = None) -> dict:
    """A task's record.json as parsed JSON (the current version, or the one given)."""
    stored = runtime.observer_store.get(record_key(task_id), version_id=version_id)
    return json.loads(stored.body)


def record_versions(runtime: LocalRuntime, task_id: str) -> dict[str, dict]:
    """Every stored version of a task's record.json: version id -> parsed JSON, newest first."""
    versions = runtime.observer_store.versions(record_key(task_id))
    return {
        v.version_id: raw_record(runtime, task_id, v.version_id)
        for v in versions
        if not v.is_delete_marker
    }


def tags_of(runtime: LocalRuntime, key: str) -> dict[str, str]:
    """The tags of an object's current version (the store protocol writes tags, never reads)."""
    if runtime.backend == "memory":
        return runtime.store.tags_of(key)
    tag_set = runtime.s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
    return {tag["Key"]: tag["Value"] for tag in tag_set}


@contextlib.contextmanager
def uploads(runtime: LocalRuntime) -> Iterator[list[tuple[str, int]]]:
    """The app's PUTs during the block, as (key, bytes of the body), in order."""
    puts: list[tuple[str, int]] = []
    if runtime.backend == "memory":
        original = runtime.store.put

        def put(key: str, body: bytes, **kwargs: Any) -> str:
            puts.append((key, len(body)))
            return original(key, body, **kwargs)

        with replaced(runtime.store, "put", put):
            yield puts
        return

    def count(params: dict[str, Any], **_: Any) -> None:
        puts.append((params["Key"], len(params["Body"])))

    with hooked(runtime.s3, {"before-parameter-build.s3.PutObject": count}):
        yield puts


def destroy(runtime: LocalRuntime, key: str) -> None:
    """Remove an object and every stored version of it: gone for good."""
    if runtime.backend == "memory":
        runtime.store.delete(key)
        runtime.store.versions = lambda key: []  # as in a bucket without versioning
        return
    listed = runtime.s3.list_object_versions(Bucket=BUCKET, Prefix=key)
    for version in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]:
        runtime.s3.delete_object(Bucket=BUCKET, Key=key, VersionId=version["VersionId"])


def agent_conversation(turns: int, words: int = 60) -> list[dict[str, Any]]:
    """An agent's messages, as model APIs write them: an assistant text and tool call, then
    the tool's result, per turn (deterministic text)."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        text = " ".join(f"word{(i * 7 + j) % 97}" for j in range(words))
        call = {"type": "tool_use", "id": f"call-{i}", "name": "search", "input": {"page": i}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}, call]})
        result = {"type": "tool_result", "tool_use_id": f"call-{i}", "content": text[::-1]}
        messages.append({"role": "user", "content": [result]})
    return messages


# -- a second app on the same bucket and queue ------------------------------------------------


def share(app: Continuum, runtime: LocalRuntime) -> Continuum:
    """Point ``app`` at the runtime's bucket and queue, as another Lambda environment (with
    its own clients on moto) of the same deployment."""
    if runtime.backend == "memory":
        app.configure(store=runtime.store, queue=runtime.queue)
        return app
    options = {"region_name": REGION, "aws_access_key_id": "x", "aws_secret_access_key": "x"}
    app.configure(
        bucket=BUCKET,
        queue_url=runtime.queue_url,
        s3_client=boto3.client("s3", **options),
        sqs_client=boto3.client("sqs", **options),
    )
    return app


def deliver(app: Continuum, runtime: LocalRuntime, context: Any) -> dict | None:
    """Receive one continuation from the shared queue and hand it to ``app``'s handler, as
    the event source would hand it to whichever environment is free."""
    messages = runtime.source.receive()
    if not messages:
        return None
    message = messages[0]
    result = app.handler({"Records": [event_record(message, runtime.queue_arn)]}, context)
    failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
    if message.message_id not in failed:
        runtime.source.delete(message.receipt_handle)
    return result


# -- faults, injected into the app's calls on either backend ----------------------------------

#: The S3 operation behind each store operation.
S3_OPERATIONS = {"get": "GetObject", "put": "PutObject"}
#: What the store makes of an S3 error code (backends/s3.py): the error on the memory backend.
STORE_ERRORS: dict[str, type[StoreError]] = {
    "PreconditionFailed": PreconditionFailed,
    "InternalError": TransientStoreError,
    "SlowDown": TransientStoreError,
    "UnknownError": StoreError,
}


def s3_error(runtime: LocalRuntime, code: str, key: str) -> Exception:
    """The error S3 answers a PutObject with ``code``, as the backend's store client sees it."""
    if runtime.backend == "memory":
        return STORE_ERRORS[code](f"{key}: {code} (injected)")
    return ClientError({"Error": {"Code": code, "Message": "injected"}}, "PutObject")


@contextlib.contextmanager
def replaced(fake: Any, name: str, method: Callable[..., Any]) -> Iterator[None]:
    """A fake's method replaced for the block (the app and the runtime share the fake)."""
    setattr(fake, name, method)
    try:
        yield
    finally:
        delattr(fake, name)


@contextlib.contextmanager
def hooked(client: Any, handlers: dict[str, Callable[..., Any]]) -> Iterator[None]:
    """botocore event handlers on a boto3 client for the block: event name -> handler."""
    events = client.meta.events
    for event, handler in handlers.items():
        events.register(event, handler)
    try:
        yield
    finally:
        for event, handler in handlers.items():
            events.unregister(event, handler)


@contextlib.contextmanager
def after_store_call(
    runtime: LocalRuntime, operation: str, action: Callable[[str], None]
) -> Iterator[None]:
    """Call ``action(key)`` after each of the app's store calls of ``operation`` ("get" or
    "put") has done its work: raising from it fails a call that landed."""
    if runtime.backend == "memory":
        original = getattr(runtime.store, operation)

        def call(key: str, *args: Any, **kwargs: Any) -> Any:
            result = original(key, *args, **kwargs)
            action(key)
            return result

        with replaced(runtime.store, operation, call):
            yield
        return
    name, keys = S3_OPERATIONS[operation], threading.local()

    def remember(params: dict[str, Any], **_: Any) -> None:
        keys.key = params.get("Key", "")

    def after(**_: Any) -> None:
        action(keys.key)

    with hooked(
        runtime.s3,
        {f"before-parameter-build.s3.{name}": remember, f"after-call.s3.{name}": after},
    ):
        yield


class StoreFaults:
    """Faults in one app's store calls, on either backend, as the library sees them after
    botocore's own retries (``continuum/backends/s3.py`` turns S3's 500 into TransientStoreError).

    The calls are the app's only (its worker's, dead-letter handler's and client's): the
    runtime's observer and event source do not meet the faults. Operations are the store's
    method names: get, put, delete, tag, tags, list_keys.
    """

    def __init__(self, app: Continuum) -> None:
        self.store = app.records.store
        self.armed: dict[str, int] = {}
        self.hooks: dict[str, list[Callable[..., Any]]] = {}

    def fail_next(self, operation: str, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` answer S3's 500 InternalError."""
        self._wrap(operation)
        self.armed[operation] = self.armed.get(operation, 0) + times

    def around(self, operation: str, hook: Callable[..., Any]) -> None:
        """Call ``hook(call, key, *args, **kwargs)`` in place of each call of ``operation``;
        ``call(key, *args, **kwargs)`` makes the real one."""
        self._wrap(operation)
        self.hooks[operation].append(hook)

    def on_finish_write(self, hook: Callable[[Callable[[], str]], str]) -> None:
        """``hook(write)`` in place of each write of a finished record (succeeded, failed,
        cancelled): ``write()`` lands it and returns its etag; what ``hook`` returns (or
        raises) answers the library's call."""

        def finish(call: Callable[..., str], key: str, body: bytes, **kwargs: Any) -> str:
            if key.endswith("/record.json") and json.loads(body)["status"] in FINISHED:
                return hook(lambda: call(key, body, **kwargs))
            return call(key, body, **kwargs)

        self.around("put", finish)

    def _wrap(self, operation: str) -> None:
        if operation in self.hooks:
            return
        self.hooks[operation] = []
        original = getattr(self.store, operation)

        def call(key: str, *args: Any, **kwargs: Any) -> Any:
            if self.armed.get(operation):
                self.armed[operation] -= 1
                raise TransientStoreError(f"{key}: InternalError (injected)")
            inner: Callable[..., Any] = original
            for hook in self.hooks[operation]:
                inner = functools.partial(hook, inner)
            return inner(key, *args, **kwargs)

        setattr(self.store, operation, call)  # the app's metered view of the store


#: The statuses of a finished record.
FINISHED = ("succeeded", "failed", "cancelled")


@contextlib.contextmanager
def atomic_writes(runtime: LocalRuntime) -> Iterator[None]:
    """Make each of the app's S3 writes atomic under threads, as on S3. moto checks a
    conditional PutObject's condition and then writes, which two threads can interleave; the
    in-memory store is atomic already."""
    if runtime.backend == "memory":
        yield
        return
    lock = threading.Lock()

    def acquire(**_: Any) -> None:
        lock.acquire(timeout=10)

    def release(**_: Any) -> None:
        lock.release()

    with hooked(
        runtime.s3, {"before-call.s3.PutObject": acquire, "after-call.s3.PutObject": release}
    ):
        yield


@contextlib.contextmanager
def sends_lost(runtime: LocalRuntime) -> Iterator[None]:
    """The app's sends report success, but no message reaches the queue."""
    if runtime.backend == "memory":
        with replaced(runtime.queue, "send", lambda body, *, delay_s=0: "never-sent"):
            yield
        return

    def drop(**_: Any) -> dict[str, str]:
        return {"MessageId": "never-sent", "MD5OfMessageBody": ""}

    with hooked(runtime.sqs, {"before-call.sqs.SendMessage": drop}):
        yield


@contextlib.contextmanager
def sends_refused(runtime: LocalRuntime) -> Iterator[None]:
    """Every send of the app fails (an SQS outage, a broken policy)."""
    if runtime.backend == "memory":
        queue, counting = runtime.queue, runtime.queue.on_call

        def refuse_send(operation: str, key: str) -> None:  # the fake's fault hook
            if operation == "send":
                raise QueueError("send failed: ServiceUnavailable (injected)")
            if counting is not None:
                counting(operation, key)

        queue.on_call = refuse_send
        try:
            yield
        finally:
            queue.on_call = counting
        return

    def refuse(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ServiceUnavailable", "Message": "injected"}}, "SendMessage"
        )

    with hooked(runtime.sqs, {"before-call.sqs.SendMessage": refuse}):
        yield


# -- the queue's settings ---------------------------------------------------------------------


def set_visibility_timeout(runtime: LocalRuntime, seconds: int) -> None:
    """Change the queue's visibility timeout (the time a received message stays hidden)."""
    if runtime.backend == "memory":
        runtime.queue.visibility_timeout_s = seconds
    else:
        runtime.sqs.set_queue_attributes(
            QueueUrl=runtime.queue_url, Attributes={"VisibilityTimeout": str(seconds)}
        )


def purge_queue(runtime: LocalRuntime) -> None:
    """Delete every message in the queue, visible or not (SQS's PurgeQueue)."""
    if runtime.backend == "memory":
        runtime.queue.purge()
    else:
        runtime.sqs.purge_queue(QueueUrl=runtime.queue_url)
