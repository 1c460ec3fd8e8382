"""moto as continuum runs it (``continuum dev``, chaos, benchmarks) loses no SQS message.

moto 5.2's ``Queue.delete_message`` rebuilds the message list and assigns it back without the
lock that ``add_message`` appends under. The test makes the send land exactly inside a
delete's rebuild: without ``faithful_moto`` the sent message vanishes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

from continuum._local.dev_stack import faithful_moto

OPTIONS = {
    "region_name": "us-east-1",
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
}


def test_a_message_sent_while_another_is_deleted_is_never_lost():
    faithful_moto()
    faithful_moto()  # once per process, however often it is asked
    with mock_aws():
        sqs = boto3.client("sqs", **OPTIONS)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="old")
        handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"][0][
            "ReceiptHandle"
        ]
        backend = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        queue = backend.queues["q"]
        sender = threading.Thread(target=backend.send_message, args=("q", "new"))

        class Walked(list):  # type: ignore[type-arg]
            """The queue's message list; a send lands when the delete's rebuild walk ends."""

            walks = 0

            def __iter__(self) -> Iterator[Any]:
                Walked.walks += 1
                yield from list.__iter__(self)
                if Walked.walks == 2:  # the first walk checks the handle; the second rebuilds
                    sender.start()
                    time.sleep(0.2)

        queue._messages = Walked(queue._messages)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
        sender.join()
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        assert [m["Body"] for m in got.get("Messages", [])] == ["new"]
