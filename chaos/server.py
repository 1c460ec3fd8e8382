"""The moto server the workers talk to, and the bucket and queues of a chaos run.

moto's S3 checks ``If-Match`` / ``If-None-Match`` and then writes, without a lock: two
threads of the server can both pass the check. Real S3 is atomic here, so the harness makes
moto's PutObject atomic (one lock in the server's process); races are then proved with the
faults the injector adds, not with moto's quirks.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import boto3

from continuum._local.dev_stack import faithful_moto
from continuum._local.runtime import REGION
from continuum.backends.queue import QueueMessage

BUCKET = "continuum-chaos"
QUEUE = "continuum-chaos"
DEAD_LETTER_QUEUE = "continuum-chaos-dlq"


def client_options(endpoint: str) -> dict[str, Any]:
    """Keyword arguments for boto3 clients pointed at the moto server."""
    return {
        "region_name": REGION,
        "endpoint_url": endpoint,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }


class MotoServer:
    """A ThreadedMotoServer on loopback, on a free port; use as a context manager."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        faithful_moto()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def __enter__(self) -> MotoServer:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def __exit__(self, *_: object) -> None:
        self._server.stop()


@dataclass(frozen=True)
class Resources:
    """The bucket and queues of one run."""

    endpoint: str
    bucket: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str


def create_resources(
    endpoint: str, *, visibility_timeout_s: int, max_receive_count: int
) -> Resources:
    """A versioned bucket, a continuation queue and its dead-letter queue."""
    options = client_options(endpoint)
    s3, sqs = boto3.client("s3", **options), boto3.client("sqs", **options)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    dlq_url = sqs.create_queue(QueueName=DEAD_LETTER_QUEUE)["QueueUrl"]
    dlq_arn = _arn(sqs, dlq_url)
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}
    queue_url = sqs.create_queue(
        QueueName=QUEUE,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout_s),
            "RedrivePolicy": json.dumps(redrive),
        },
    )["QueueUrl"]
    return Resources(endpoint, BUCKET, queue_url, _arn(sqs, queue_url), dlq_url, dlq_arn)


def _arn(sqs: Any, url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])


def queue_depth(sqs: Any, url: str) -> int:
    """Messages in the queue: visible, in flight and delayed."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes.get(name, 0)) for name in names)


def as_queue_message(message: Any) -> QueueMessage:
    """A received SQS message (boto3's dict) as the queue protocol's QueueMessage."""
    attributes = message.get("Attributes", {})
    return QueueMessage(
        body=message["Body"],
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        receive_count=int(attributes.get("ApproximateReceiveCount", "1")),
    )


@dataclass(frozen=True)
class StoredVersion:
    """One version of one object, as the bucket holds it after the run."""

    key: str
    version_id: str
    body: bytes | None  # None: a delete marker
    latest: bool


def backend_versions(bucket: str, prefix: str) -> list[StoredVersion] | None:
    """Every version under ``prefix``, oldest first per key, read from the moto backend that
    serves the server in this process; None if that is not possible (another moto).

    The same objects the S3 API would return, in their true write order, without one HTTP
    request per version: the checks read thousands of versions, and the one server process
    serves them slowly.
    """
    try:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.s3.models import FakeDeleteMarker, s3_backends

        store = s3_backends[DEFAULT_ACCOUNT_ID]["global"].get_bucket(bucket).keys
        found = []
        for key, versions in store.iterlists():
            if not key.startswith(prefix):
                continue
            for i, version in enumerate(versions):
                marker = isinstance(version, FakeDeleteMarker)
                body = None if marker else bytes(version.value)
                found.append(
                    StoredVersion(key, str(version.version_id), body, i == len(versions) - 1)
                )
        return found
    except Exception:  # a moto without these internals: the checks use the S3 API
        return None
