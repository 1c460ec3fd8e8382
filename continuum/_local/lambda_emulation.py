"""What Lambda gives a handler, emulated: its context object and its SQS event records."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from continuum._base.clock import now_s
from continuum.backends.queue import QueueMessage

REGION = "us-east-1"
ACCOUNT = "123456789012"


class LocalLambdaContext:
    """The parts of Lambda's context object that continuum reads, with a chosen deadline."""

    def __init__(self, budget_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._deadline = clock() + budget_s
        self.aws_request_id = uuid.uuid4().hex
        self.function_name = "continuum-local"
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:continuum-local"
        self.log_group_name = "/aws/lambda/continuum-local"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))


def event_record(message: QueueMessage, queue_arn: str) -> dict[str, Any]:
    """One record of the SQS event Lambda builds from a received message."""
    now_ms = str(int(now_s() * 1000))
    return {
        "messageId": message.message_id,
        "receiptHandle": message.receipt_handle,
        "body": message.body,
        "attributes": {
            "ApproximateReceiveCount": str(message.receive_count),
            "SentTimestamp": now_ms,
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": now_ms,
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(message.body.encode()).hexdigest(),  # noqa: S324 - SQS's digest
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }
