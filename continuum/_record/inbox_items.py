"""The objects of a task's inbox (``inbox.py``), as the models that write and read them.

They are imported where they are written or read (a callback answered or awaited, a cancel
request, a child's report): a worker handling a message that meets none of them never loads
them, which keeps their four models out of its cold import.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from continuum._record.model import ErrorInfo
from continuum._record.unknown_fields import IgnoresUnknownFields


class CallbackAnswer(IgnoresUnknownFields):
    """A callback's answer: a result, or an error type and message."""

    ok: bool
    result: Any = None
    error_type: str | None = None
    message: str | None = None
    answered_at: datetime
    #: written by the worker that took the callback's timeout: it closes the callback, so an
    #: answer that comes after it is refused (both are created with If-None-Match on one key).
    timed_out: bool = False


class StartRefusal(IgnoresUnknownFields):
    """Why a worker refused a pending task's start message (``refused.json``): the worker
    writes it, as the record's status cannot say it without a write from outside the fence."""

    reason: str
    at: datetime


class Heartbeat(IgnoresUnknownFields):
    at: datetime


class CancelRequest(IgnoresUnknownFields):
    reason: str | None = None
    requested_at: datetime
    #: not a request: the finish of the task closed it to cancel requests (created on the
    #: request's key, so a request after it is refused, and one before it cancels the task).
    closed: bool = False


ReportStatus = Literal["succeeded", "failed", "cancelled"]


class ChildReport(IgnoresUnknownFields):
    """What a finished child tells its parent (``children/{child_id}/{status}.json``)."""

    child_id: str
    index: int
    status: ReportStatus
    result: Any = None
    error: ErrorInfo | None = None
