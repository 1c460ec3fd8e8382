"""The continuation queue: where continuations wait, as bodies with delays and visibility.

:class:`ContinuationQueue` is the one seam to the queue. Its semantics are those of an SQS
standard queue: at-least-once delivery, a per-message delay of 0-900 s, a visibility timeout
that hides a received message until it is deleted or the timeout passes, and a receive count.
``sqs.SQSContinuationQueue`` implements it on SQS; ``memory.InMemoryContinuationQueue`` in
memory. What a body means (and its signature) is ``continuum._record.continuation``.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

#: SQS refuses DelaySeconds above 900 on a standard queue.
MAX_DELAY_S = 900
#: SQS refuses a visibility timeout above 12 hours.
MAX_VISIBILITY_S = 12 * 60 * 60


class QueueError(Exception):
    """A queue operation failed (the SQS call raised, or the fake was told to fail)."""


class QueueMessage(NamedTuple):
    """A received message: its body, its id, the handle to delete it, how often it came."""

    body: str
    message_id: str
    receipt_handle: str
    receive_count: int = 1


class ContinuationQueue(Protocol):
    """Bodies in a standard queue.

    Attributes:
        max_delay_s: the longest delay ``send`` honours (SQS: 900 s; a wait longer than this
            is a chain of timer hops).
    """

    max_delay_s: int

    def send(self, body: str, *, delay_s: int = 0) -> str:
        """Send a message, visible after ``delay_s`` seconds; return its id."""
        ...

    def set_visibility(self, receipt_handle: str, seconds: int) -> None:
        """Hide a received message for ``seconds`` from now (0: visible again at once)."""
        ...

    def receive(self, *, max_messages: int = 1, wait_s: int = 0) -> list[QueueMessage]:
        """Receive up to ``max_messages`` visible messages, long-polling ``wait_s`` seconds."""
        ...

    def delete(self, receipt_handle: str) -> None:
        """Acknowledge a received message: it is never delivered again."""
        ...
