"""The continuation queue on SQS: a standard queue behind the ContinuationQueue protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from continuum.backends.queue import MAX_DELAY_S, MAX_VISIBILITY_S, QueueError, QueueMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SQSContinuationQueue:
    """One SQS standard queue, through an injected boto3 client.

    Example:
        >>> queue = SQSContinuationQueue(boto3.client("sqs"), queue_url)  # doctest: +SKIP
    """

    max_delay_s = MAX_DELAY_S

    def __init__(self, sqs_client: SQSClient, queue_url: str) -> None:
        self.sqs_client = sqs_client
        self.queue_url = queue_url

    def send(self, body: str, *, delay_s: int = 0) -> str:
        try:
            response = self.sqs_client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                DelaySeconds=max(0, min(MAX_DELAY_S, int(delay_s))),
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(f"send failed: {exc}") from exc
        return response["MessageId"]

    def set_visibility(self, receipt_handle: str, seconds: int) -> None:
        try:
            self.sqs_client.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=receipt_handle,
                VisibilityTimeout=max(0, min(MAX_VISIBILITY_S, int(seconds))),
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(f"change visibility failed: {exc}") from exc

    def receive(self, *, max_messages: int = 1, wait_s: int = 0) -> list[QueueMessage]:
        try:
            response = self.sqs_client.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=max(1, min(10, max_messages)),
                WaitTimeSeconds=max(0, min(20, int(wait_s))),
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(f"receive failed: {exc}") from exc
        return [
            QueueMessage(
                body=m["Body"],
                message_id=m["MessageId"],
                receipt_handle=m["ReceiptHandle"],
                receive_count=int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
            )
            for m in response.get("Messages", [])
        ]

    def delete(self, receipt_handle: str) -> None:
        try:
            self.sqs_client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt_handle)
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(f"delete failed: {exc}") from exc
