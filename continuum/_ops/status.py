"""What ``Client.status`` reports (a task's status, its counters, what it waits for, and its
children) and how ``Client.tasks`` lists a task. An operator's view, imported on first use (a
worker's cold start never needs it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from continuum._base.callback_links import CallbackLinks
from continuum._base.clock import utcnow
from continuum._record.inbox import Inbox
from continuum._record.model import Counters, ErrorInfo, Status, TaskRecord
from continuum._record.waiting_for import Waiter
from continuum._waits.kinds.callback_wait import CALLBACK, token_of
from continuum._waits.kinds.child_wait import batch_counts
from continuum._worker.wake import waiting_for

#: A start message no worker has taken after this long is worth a word in the status: a worker
#: on the queue takes one within seconds (an SQS event source polls all the time).
UNTAKEN_START_S = 60.0


class ChildrenSummary(BaseModel):
    """A parent's child tasks, from their reports: how many ended how, and the failed ones."""

    total: int
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    #: not reported yet: pending or running (or finished a moment ago).
    unfinished: int = 0
    failed_ids: list[str] = []


class WaitingFor(Waiter):
    """What a task waits for, as the status shows it: with a callback's link, when the app
    has a link endpoint (derived from the record, never stored in it)."""

    url: str | None = None


class TaskStatus(BaseModel):
    """What a task is doing, as ``Client.status`` reports it."""

    task_id: str
    task_name: str
    status: Status
    generation: int
    turn: int
    result: Any = None
    error: ErrorInfo | None = None
    suspend_reason: str | None = None
    #: why a task that has never run is not running, and what to do (None: nothing to say).
    hint: str | None = None
    counters: Counters
    #: what the task waits for now, and every callback it created and has not taken an
    #: answer for (with the id to answer it by); nothing once the task has finished.
    waiting_for: list[WaitingFor] = []
    #: the task this one is a child of, and this one's own children.
    parent: str | None = None
    children: ChildrenSummary | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None


class TaskSummary(BaseModel):
    """One task as ``Client.tasks`` (``continuum list``) lists it."""

    task_id: str
    task_name: str
    status: Status
    turn: int
    invocations: int
    created_at: datetime
    updated_at: datetime
    #: the task this one is a child of, and its index in that task's batch.
    parent: str | None = None
    index: int = 0


def task_status(
    record: TaskRecord, inbox: Inbox, *, links: CallbackLinks | None = None
) -> TaskStatus:
    """The status of ``record``'s task; a parent's children are counted from its inbox; each
    open callback has its link when ``links`` is given and has a signing key."""
    derived = {"waiting_for", "parent", "children"}
    status = TaskStatus.model_validate(
        record.model_dump(include=set(TaskStatus.model_fields) - derived)
    )
    status.waiting_for = [shown_waiter(record, waiter, links) for waiter in waiting_for(record)]
    status.parent = record.parent.task_id if record.parent else None
    if record.children:
        status.children = children_summary(record, inbox)
    status.hint = unstarted_hint(record, inbox)
    return status


def unstarted_hint(record: TaskRecord, inbox: Inbox) -> str | None:
    """Why a pending task that no worker has run may not be running, and how to mend it: a
    worker refused a message naming it (it said why beside the record), or none has started it
    in ``UNTAKEN_START_S``. Each is evidence, not proof (anyone may send a message naming a
    task, and a signed start may still be queued), so the hint says what it saw and what to
    check. None for a child (its parent starts it, signed, when its batch has room), any other
    task, or a start too recent to judge."""
    if record.status != Status.PENDING or record.counters.invocations or record.parent:
        return None
    resume = f"continuum resume {record.task_id}"
    refusal = inbox.start_refusal(record.task_id)
    if refusal is not None:
        return (
            f"a message naming this task was refused at {refusal.at:%Y-%m-%d %H:%M:%S}Z: "
            f"{refusal.reason}. If this task was started by something without the worker's "
            "signing key, give it the worker's CONTINUUM_SIGNING_KEY, then send the start "
            f"again, signed (harmless if a signed start is on its way): {resume}"
        )
    waited_s = (utcnow() - record.created_at).total_seconds()
    if waited_s < UNTAKEN_START_S:
        return None
    return (
        f"no worker has started this task in the {waited_s:.0f} s since it was created: its "
        "start message may still wait in the queue behind others, or no worker reads this "
        "queue, or a worker rejected it, or its sender died before sending it. Check that a "
        "worker runs on this queue (continuum dev, continuum worker, or the stack's function) "
        "and that its logs show no 'rejected a message' (a signing key that differs); then "
        f"send the start again (a duplicate of a start still queued is harmless): {resume}"
    )


def shown_waiter(record: TaskRecord, waiter: Waiter, links: CallbackLinks | None) -> WaitingFor:
    """``waiter`` as a person sees it: a callback's with its link, when ``links`` can sign one."""
    shown = WaitingFor.model_validate(waiter.model_dump())
    token = token_of(waiter.id)
    callback = record.callbacks.get(token) if waiter.kind == CALLBACK.kind else None
    if callback is not None and links is not None and links.keys:
        shown.url = links.url(record.task_id, token)
    return shown


def children_summary(record: TaskRecord, inbox: Inbox) -> ChildrenSummary:
    keys = inbox.list(record.task_id).keys
    summary = ChildrenSummary(total=sum(batch.count for batch in record.children))
    for batch in record.children:
        for child, state in batch_counts(keys, batch.prefix).items():
            if state == "succeeded":
                summary.succeeded += 1
            elif state == "failed":
                summary.failed += 1
                summary.failed_ids.append(child)
            else:
                summary.cancelled += 1
    reported = summary.succeeded + summary.failed + summary.cancelled
    summary.unfinished = summary.total - reported
    return summary
