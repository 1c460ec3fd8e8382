"""Shared fixtures: moto in-process, and Lambda contexts whose deadline a test controls."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import LocalRuntime, moto_backend

# boto3 must never reach a real account from a test.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"


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


@pytest.fixture
def aws() -> Iterator[None]:
    with moto_backend():
        yield


def drain(runtime: LocalRuntime, task_id: str, contexts: Callable[[int], Any], limit: int = 200):
    """Invoke until the task finishes; ``contexts(i)`` gives the i-th invocation's context."""
    for i in range(limit):
        if runtime.record(task_id).status.finished:
            return runtime.record(task_id)
        if runtime.invoke_once(contexts(i)) is None:
            raise AssertionError(f"no message waiting for unfinished task {task_id}")
    raise AssertionError("task did not finish")


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


def snapshot_objects(s3, bucket: str) -> dict[str, str]:
    """Every object version in the bucket: key -> latest etag (to prove nothing changed)."""
    objects = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for version in page.get("Versions", []):
            if version["IsLatest"]:
                objects[version["Key"]] = version["ETag"]
    return objects
