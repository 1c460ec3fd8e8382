"""A task's inbox as a running turn reads it: the last listing, and reads through it.

A store error on one of its reads suspends the turn instead of failing the task; the store's
side of the inbox (``_record.inbox.Inbox``) knows nothing of turns.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel

from continuum._base.clock import utcnow
from continuum._record.inbox import Inbox, Listing
from continuum._record.waiting_for import Signal
from continuum._steps.control_flow import Suspend
from continuum.backends.store import StoreError

if TYPE_CHECKING:
    from continuum._record.inbox_items import CallbackAnswer, CancelRequest
    from continuum._record.model import ErrorInfo

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")


class TaskInbox:
    """One task's inbox as a running turn sees it: the last listing, and reads through it.

    A store error on one of its reads (S3's 5xx after botocore's retries) suspends the turn
    (``Suspend``: the task continues in a fresh invocation, which reads again) instead of
    failing the task: nothing was taken, so nothing is lost.

    Args:
        inbox: the store's inboxes (None: a turn loop without a store, as in unit tests).
        task_id: the task.
        checked_at: when the inbox was last listed (epoch s; from the record).
    """

    def __init__(self, inbox: Inbox | None, task_id: str, *, checked_at: float) -> None:
        self._inbox = inbox
        self.task_id = task_id
        self.listed_at = checked_at
        self._listing: Listing | None = None

    @property
    def stack(self) -> str:
        """The stack of the task's records (``Inbox.stack``; "" without a store)."""
        return "" if self._inbox is None else self._inbox.stack

    @property
    def listing(self) -> Listing:
        """The latest listing of this invocation (listed now if there is none yet)."""
        if self._listing is None:
            return self.refresh()
        return self._listing

    def refresh(self) -> Listing:
        """List the inbox now (one LIST)."""
        inbox = self._inbox
        listing = Listing() if inbox is None else _live(lambda: inbox.list(self.task_id))
        self._listing, self.listed_at = listing, listing.listed_at
        return listing

    def adopt(self, listing: Listing) -> None:
        """Use a listing the worker made at the claim."""
        self._listing, self.listed_at = listing, listing.listed_at

    def answer(self, token: str) -> CallbackAnswer | None:
        if self._inbox is None or not self.listing.has_answer(token):
            return None
        inbox = self._inbox
        return _live(lambda: inbox.answer(self.task_id, token))

    def close_callback(self, token: str, timeout: ErrorInfo) -> CallbackAnswer:
        """Close a callback that timed out, unless an answer came first: the one that won
        (the timeout, or the sender's answer). Both are created with If-None-Match on one
        key, so a sender told "accepted" was always heard."""
        from continuum._record.inbox_items import CallbackAnswer

        marker = CallbackAnswer(
            ok=False,
            error_type=timeout.type,
            message=timeout.message,
            answered_at=utcnow(),
            timed_out=True,
        )
        inbox = self._inbox
        if inbox is None or _live(lambda: inbox.put_answer(self.task_id, token, marker)):
            return marker
        answer = _live(lambda: inbox.answer(self.task_id, token))
        return answer if answer is not None else marker

    def heartbeat(self, token: str) -> datetime | None:
        if self._inbox is None or not self.listing.has_heartbeat(token):
            return None
        inbox = self._inbox
        return _live(lambda: inbox.heartbeat(self.task_id, token))

    def cancel(self) -> CancelRequest | None:
        """The cancel request in the inbox. A close left by a finish whose write never
        landed (this worker holds the task now) is removed: cancels are taken again."""
        if self._inbox is None or not self.listing.has_cancel:
            return None
        inbox = self._inbox
        request = _live(lambda: inbox.cancel(self.task_id))
        if request is None or not request.closed:
            return request
        _live(lambda: inbox.reopen_to_cancel(self.task_id))
        return None

    def read(self, relative: str, model: type[M]) -> M | None:
        """An object of this inbox (``relative``: its key in the listing)."""
        if self._inbox is None:
            return None
        inbox = self._inbox
        return _live(lambda: inbox._read(self.task_id, relative, model))

    def oldest_signal(self, name: str, taken: set[str]) -> tuple[str, Signal] | None:
        if self._inbox is None:
            return None
        inbox, listing = self._inbox, self.listing
        return _live(lambda: inbox.oldest_signal(self.task_id, name, listing, taken))


def _live(read: Callable[[], R]) -> R:
    """``read()``; a store error suspends the running turn (see ``TaskInbox``)."""
    try:
        return read()
    except StoreError as exc:
        raise Suspend(f"could not read the inbox ({exc}); continuing afresh") from exc
