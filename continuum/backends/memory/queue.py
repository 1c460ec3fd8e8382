"""An SQS standard queue in memory, behind the ContinuationQueue protocol."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from continuum.backends.memory.clock import Clock, Hook, new_id, wall_clock
from continuum.backends.queue import MAX_DELAY_S, MAX_VISIBILITY_S, QueueError, QueueMessage


@dataclass
class _Message:
    message_id: str
    body: str
    visible_at: float
    receive_count: int = 0
    receipt_handle: str | None = None


class InMemoryContinuationQueue:
    """An SQS standard queue in memory, behind the ContinuationQueue protocol.

    Args:
        clock: epoch seconds (default: the real clock).
        visibility_timeout_s: how long a received message stays hidden.
        max_receive_count: with ``dead_letter``, a message received more often moves there.
        dead_letter: the dead-letter queue.
        on_call: a fault hook, called with ``(operation, message id or "")``.
        max_delay_s: the longest delay honoured (SQS's 900 s by default; a virtual-time test
            runner may lift it so that a month-long sleep is one message, not 2,880 hops).
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        visibility_timeout_s: float = 30.0,
        max_receive_count: int | None = None,
        dead_letter: InMemoryContinuationQueue | None = None,
        on_call: Hook | None = None,
        max_delay_s: int = MAX_DELAY_S,
    ) -> None:
        self.clock = clock or wall_clock
        self.max_delay_s = max_delay_s
        self.visibility_timeout_s = visibility_timeout_s
        self.max_receive_count = max_receive_count
        self.dead_letter = dead_letter
        self.on_call = on_call
        self._messages: list[_Message] = []
        #: Every receipt handle given out, and the id of the message it was given for.
        self._handed_out: dict[str, str] = {}
        self._lock = threading.Condition()

    def send(self, body: str, *, delay_s: int = 0) -> str:
        self._hook("send", "")
        delay = max(0, min(self.max_delay_s, int(delay_s)))
        message = _Message(new_id(), body, self.clock() + delay)
        with self._lock:
            self._messages.append(message)
            self._lock.notify_all()
        return message.message_id

    def set_visibility(self, receipt_handle: str, seconds: int) -> None:
        self._hook("set_visibility", receipt_handle)
        with self._lock:
            message_id = self._given(receipt_handle, "change visibility")
            if not any(m.message_id == message_id for m in self._messages):
                raise QueueError("change visibility failed: ReceiptHandleIsInvalid (deleted)")
            message = self._by_receipt(receipt_handle)
            if message is not None:  # an older handle of a message received again: no effect
                message.visible_at = self.clock() + max(0, min(MAX_VISIBILITY_S, seconds))

    def receive(self, *, max_messages: int = 1, wait_s: int = 0) -> list[QueueMessage]:
        self._hook("receive", "")
        with self._lock:
            got = self._take(max_messages)
            if got or wait_s <= 0 or self.clock is not wall_clock:
                return got
            deadline = time.monotonic() + wait_s  # long polling, on the real clock only
            while True:
                self._lock.wait(timeout=min(0.05, max(0.0, deadline - time.monotonic())))
                got = self._take(max_messages)
                if got or time.monotonic() >= deadline:
                    return got

    def delete(self, receipt_handle: str) -> None:
        self._hook("delete", receipt_handle)
        with self._lock:
            self._given(receipt_handle, "delete")
            # An older handle of a message received again deletes nothing, and says nothing
            # (SQS: "the request succeeds, but the message will not be deleted").
            message = self._by_receipt(receipt_handle)
            if message is not None:
                self._messages.remove(message)

    # -- for tests -----------------------------------------------------------------------------

    def __len__(self) -> int:
        """Messages in the queue, visible or not."""
        with self._lock:
            return len(self._messages)

    def bodies(self) -> list[str]:
        """The bodies of every message in the queue, visible or not, oldest first."""
        with self._lock:
            return [m.body for m in self._messages]

    def purge(self) -> None:
        """Delete every message, visible or not (SQS's PurgeQueue)."""
        with self._lock:
            self._messages.clear()

    def next_visible_at(self) -> float | None:
        """When the next message becomes visible (None: the queue is empty)."""
        with self._lock:
            return min((m.visible_at for m in self._messages), default=None)

    def _take(self, most: int) -> list[QueueMessage]:
        now = self.clock()
        got: list[QueueMessage] = []
        for message in list(self._messages):
            if len(got) >= most:
                break
            if message.visible_at > now:
                continue
            if (
                self.dead_letter is not None
                and self.max_receive_count is not None
                and message.receive_count >= self.max_receive_count
            ):
                self._messages.remove(message)
                self.dead_letter._adopt(message)
                continue
            message.receive_count += 1
            message.receipt_handle = new_id()
            self._handed_out[message.receipt_handle] = message.message_id
            message.visible_at = now + self.visibility_timeout_s
            got.append(
                QueueMessage(
                    body=message.body,
                    message_id=message.message_id,
                    receipt_handle=message.receipt_handle,
                    receive_count=message.receive_count,
                )
            )
        return got

    def _adopt(self, message: _Message) -> None:
        with self._lock:
            self._messages.append(
                _Message(message.message_id, message.body, self.clock(), message.receive_count)
            )

    def _given(self, receipt_handle: str, operation: str) -> str:
        """The id of the message a receipt handle was given for; as SQS, refuse one never given."""
        if receipt_handle not in self._handed_out:
            raise QueueError(f"{operation} failed: ReceiptHandleIsInvalid (never given out)")
        return self._handed_out[receipt_handle]

    def _by_receipt(self, receipt_handle: str) -> _Message | None:
        return next((m for m in self._messages if m.receipt_handle == receipt_handle), None)

    def _hook(self, operation: str, key: str) -> None:
        if self.on_call is not None:
            self.on_call(operation, key)
