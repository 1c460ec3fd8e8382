"""The local runtime: moto-simulated S3 and SQS, and emulated Lambda invocations.

It creates a bucket (versioned) and a continuation queue, points the app at them, and then
plays the part of Lambda's SQS event source: it receives messages, calls ``app.handler`` with
an SQS batch event and a Lambda context whose deadline is the chosen budget, and deletes the
messages the handler did not report as failed. SQS delays and visibility timeouts apply as
moto applies them, so continuations, retries and redeliveries really happen.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3

from continuum.app import Continuum
from continuum.errors import ContinuumError
from continuum.record import Status, TaskRecord
from continuum.store import RecordStore

REGION = "us-east-1"
BUCKET = "continuum-local"
QUEUE = "continuum-local"
#: How long the emulated event source waits before polling an empty queue again.
POLL_INTERVAL_S = 0.02


class LocalLambdaContext:
    """The parts of Lambda's context object that continuum reads, with a chosen deadline."""

    def __init__(self, budget_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._deadline = clock() + budget_s
        self.aws_request_id = uuid.uuid4().hex
        self.function_name = "continuum-local"
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:continuum-local"
        self.log_group_name = "/aws/lambda/continuum-local"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))


class CallCounter:
    """Counts AWS API calls made through the clients it is attached to."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def attach(self, client: Any) -> None:
        client.meta.events.register("after-call", self._count)

    def _count(self, event_name: str, **_kwargs: Any) -> None:
        # event_name is "after-call.<service>.<Operation>"
        _hook, service, operation = event_name.split(".", 2)
        self.calls[f"{service}:{operation}"] += 1

    def total(self, service: str) -> int:
        return sum(n for key, n in self.calls.items() if key.startswith(f"{service}:"))


@dataclass
class Invocation:
    """What one emulated invocation did to the task."""

    number: int
    outcome: str
    status: str
    turn: int
    steps_executed: int
    steps_replayed: int
    seconds: float
    overran: bool
    reason: str | None = None


@dataclass
class RunSummary:
    """The end of a local run: the task's fate and what it took."""

    task_id: str
    status: str
    result: Any
    error: str | None
    invocations: int
    continuations: int
    steps: int
    steps_replayed: int
    turns: int
    overruns: int
    seconds: float
    s3_calls: int
    sqs_calls: int
    aws_calls: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)


@contextlib.contextmanager
def moto_backend() -> Iterator[None]:
    """Run the block with moto's in-process S3 and SQS, and fake credentials."""
    from moto import mock_aws

    with mock_aws():
        yield


class LocalRuntime:
    """Runs an app's tasks end to end on a bucket and queue it creates, invocation by invocation.

    Use inside :func:`moto_backend` (or against any endpoint the clients point at).

    Args:
        app: the app whose tasks to run; it is pointed at the runtime's bucket and queue.
        budget_s: the deadline of each emulated invocation, in seconds.
        batch_size: messages per emulated SQS batch.
        endpoint_url: an S3/SQS endpoint (a moto server); None for in-process moto.
    """

    def __init__(
        self,
        app: Continuum,
        *,
        budget_s: float,
        batch_size: int = 1,
        endpoint_url: str | None = None,
        visibility_timeout_s: int | None = None,
    ) -> None:
        self.app = app
        self.budget_s = budget_s
        self.batch_size = batch_size
        self.counter = CallCounter()
        options: dict[str, Any] = {
            "region_name": REGION,
            "endpoint_url": endpoint_url,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.s3 = boto3.client("s3", **options)
        self.sqs = boto3.client("sqs", **options)
        # The event source and the observer use their own clients, so that the counter
        # sees only the calls the framework makes.
        self._source_sqs = boto3.client("sqs", **options)
        self._observer_s3 = boto3.client("s3", **options)
        self.counter.attach(self.s3)
        self.counter.attach(self.sqs)
        self.s3.create_bucket(Bucket=BUCKET)
        self.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        visibility = visibility_timeout_s or max(6, int(budget_s * 6))
        self.queue_url = self.sqs.create_queue(
            QueueName=QUEUE, Attributes={"VisibilityTimeout": str(visibility)}
        )["QueueUrl"]
        self.queue_arn = f"arn:aws:sqs:{REGION}:123456789012:{QUEUE}"
        app.configure(
            bucket=BUCKET, queue_url=self.queue_url, s3_client=self.s3, sqs_client=self.sqs
        )
        self.observer = RecordStore(
            s3_client=self._observer_s3, bucket=BUCKET, prefix=app.store.prefix
        )
        self.counter.calls.clear()
        self.invocations = 0

    def record(self, task_id: str) -> TaskRecord:
        """Read a task's record without counting the call."""
        return self.observer.load(task_id)[0]

    def invoke_once(self, context: Any = None) -> dict[str, Any] | None:
        """Receive one batch and run the handler on it, as Lambda would; None if none waits.

        ``context`` replaces the Lambda context (default: one with this runtime's budget).
        """
        response = self._source_sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages:
            return None
        event = {"Records": [event_record(m, self.queue_arn) for m in messages]}
        self.invocations += 1
        result = self.app.handler(event, context or LocalLambdaContext(self.budget_s))
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        for message in messages:
            if message["MessageId"] not in failed:
                self._source_sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return result

    def run(
        self,
        task_name: str,
        input: Any,
        *,
        task_id: str | None = None,
        on_invocation: Callable[[Invocation], None] | None = None,
        timeout_s: float = 600.0,
    ) -> RunSummary:
        """Start a task and run invocations until it finishes; return the summary."""
        started = time.monotonic()
        task_id = self.app.client().start(task_name, input, task_id=task_id)
        overruns = 0
        before = self.record(task_id)
        while True:
            if time.monotonic() - started > timeout_s:
                raise ContinuumError(
                    f"the task did not finish within {timeout_s:.0f}s", task_id=task_id
                )
            t0 = time.monotonic()
            result = self.invoke_once()
            if result is None:
                if before.status.finished:
                    break
                time.sleep(POLL_INTERVAL_S)
                continue
            seconds = time.monotonic() - t0
            after = self.record(task_id)
            overran = seconds > self.budget_s
            overruns += int(overran)
            if on_invocation is not None:
                on_invocation(
                    Invocation(
                        number=self.invocations,
                        outcome=after.status.value,
                        status=after.status.value,
                        turn=after.turn,
                        steps_executed=after.counters.steps_executed
                        - before.counters.steps_executed,
                        steps_replayed=after.counters.steps_replayed
                        - before.counters.steps_replayed,
                        seconds=seconds,
                        overran=overran,
                        reason=after.suspend_reason if after.status == Status.SUSPENDED else None,
                    )
                )
            before = after
        record = before
        return RunSummary(
            task_id=task_id,
            status=record.status.value,
            result=record.result,
            error=record.error.message if record.error else None,
            invocations=record.counters.invocations,
            continuations=record.counters.continuations,
            steps=record.counters.steps_executed,
            steps_replayed=record.counters.steps_replayed,
            turns=record.counters.turns,
            overruns=overruns,
            seconds=round(time.monotonic() - started, 3),
            s3_calls=self.counter.total("s3"),
            sqs_calls=self.counter.total("sqs"),
            aws_calls=dict(sorted(self.counter.calls.items())),
        )


def event_record(message: Any, queue_arn: str) -> dict[str, Any]:
    """One record of the SQS event Lambda builds from a received message."""
    attributes = message.get("Attributes", {})
    body = message["Body"]
    now_ms = str(int(time.time() * 1000))
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", now_ms),
            "SenderId": attributes.get("SenderId", "AIDAEXAMPLE"),
            "ApproximateFirstReceiveTimestamp": attributes.get(
                "ApproximateFirstReceiveTimestamp", now_ms
            ),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's own digest
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }
