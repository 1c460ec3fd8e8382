"""SQS: send continuation messages and adjust their visibility, on an injected client.

The queue is a standard queue: FIFO queues allow no per-message delay, and duplicates are
harmless because the record fences them. The state never travels in a message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from continuum.record import Continuation, decode_message, encode_message

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

#: SQS refuses DelaySeconds above 900 on a standard queue.
MAX_DELAY_S = 900
#: SQS refuses a visibility timeout above 12 hours.
MAX_VISIBILITY_S = 12 * 60 * 60


@dataclass
class ContinuationQueue:
    """The continuation queue of one app.

    Example:
        >>> queue = ContinuationQueue(sqs_client=sqs, queue_url=url)  # doctest: +SKIP
        >>> queue.send(task_id="t1", generation=3, reason="budget")  # doctest: +SKIP
    """

    sqs_client: SQSClient
    queue_url: str
    signing_key: str | None = None

    def send(self, *, task_id: str, generation: int, reason: str, delay_s: int = 0) -> str:
        """Send the continuation for ``generation`` of ``task_id``; return the message id."""
        message = Continuation(
            task_id=task_id, generation=generation, reason=reason[:200], sent_at=time.time()
        )
        response = self.sqs_client.send_message(
            QueueUrl=self.queue_url,
            MessageBody=encode_message(message, signing_key=self.signing_key),
            DelaySeconds=max(0, min(MAX_DELAY_S, delay_s)),
        )
        return response["MessageId"]

    def parse(self, body: str) -> Continuation:
        """Parse (and, with a signing key, verify) a continuation body."""
        return decode_message(body, signing_key=self.signing_key)

    def extend(self, *, receipt_handle: str, visibility_s: int) -> None:
        """Set how long the message being processed stays invisible from now on."""
        self.sqs_client.change_message_visibility(
            QueueUrl=self.queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=max(0, min(MAX_VISIBILITY_S, visibility_s)),
        )
