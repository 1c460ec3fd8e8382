"""A waiting task, as the worker sees it: is it due, was it answered, and what to send.

A ``waiting`` record says what its task waits for (``record.waiting_for``) and when the
earliest deadline falls (``record.wake_at``). No invocation runs while it waits. A message for
it is one of three things, and the worker (``worker.py``) acts on what this module decides:

- **RUN**: a deadline passed, or the inbox holds what a waiter waits for (a callback's answer,
  a signal of its name, a cancel request): claim the record and run the turn; the waits in it
  replay and take what arrived.
- **HOP**: a timer arrived before the deadline (SQS delays a message 900 s at most, so a long
  sleep is a chain of hops): write the record with generation + 1 (the fence: a duplicated
  hop is stale) and send the next timer. No user code runs.
- **IGNORE**: a wake that answers nothing (a signal of another name, a duplicate): acknowledge,
  write nothing.

After writing ``waiting`` the worker looks at the inbox once more (:func:`after_wait`): a sender
writes its object and then reads the record, so whatever it wrote before that read, this look
sees, and whatever it wrote after, its wake names the new generation.
"""

from __future__ import annotations

import functools
import math
import time
from datetime import datetime
from enum import StrEnum

from continuum._base.clock import now_s
from continuum._record.continuation import Continuation, Continuations
from continuum._record.inbox import Inbox, Listing
from continuum._record.model import Status, TaskRecord
from continuum._record.waiting_for import Waiter, epoch_to_datetime
from continuum._waits.kinds.callback_wait import CALLBACK
from continuum._waits.kinds.child_wait import CHILD_RECHECK_S as CHILD_RECHECK_S
from continuum._waits.kinds.child_wait import batch_counts, decisive
from continuum._waits.kinds.registry import operation_of
from continuum._worker.long_waits import LongWaits
from continuum.backends.queue import MAX_DELAY_S

#: A timer may come this much before its deadline and still count as due (clock skew between
#: SQS and the worker); the wait itself sleeps what is left in place.
EARLY_S = 0.5


class Decision(StrEnum):
    RUN = "run"
    HOP = "hop"
    IGNORE = "ignore"


def answered(record: TaskRecord, listing: Listing) -> bool:
    """Whether the inbox holds something a waiter of ``record`` waits for (or a cancel)."""
    if listing.has_cancel and (record.cancel is None or not record.cancel.delivered):
        return True
    return any(
        operation_of(waiter.kind).answered(waiter, record, listing) for waiter in record.waiting_for
    )


def refresh_deadlines(record: TaskRecord, inbox: Inbox, listing: Listing, *, now: float) -> None:
    """Move deadlines by what came meanwhile (a callback's heartbeats), and recompute
    ``wake_at``."""
    read = functools.partial(inbox.heartbeat, record.task_id)
    for waiter in record.waiting_for:
        operation_of(waiter.kind).refresh(waiter, record, listing, read)
    record.wake_at = next_wake(record.waiting_for, now)


def decide(record: TaskRecord, listing: Listing, *, timer: bool, now: float) -> Decision:
    """What to do with a message for a waiting record, given its inbox."""
    if answered(record, listing):
        return Decision.RUN
    due = [w.deadline for w in record.waiting_for if w.deadline is not None]
    if any(now >= deadline.timestamp() - EARLY_S for deadline in due):
        return Decision.RUN
    if timer and record.wake_at is not None:
        return Decision.HOP
    return Decision.IGNORE


def next_wake(waiters: list[Waiter], now: float) -> datetime | None:
    """When a waiting record's timer fires: its earliest deadline, and while it waits for
    what its inbox must be looked at for (child tasks: every ``CHILD_RECHECK_S``; a child
    that died between its result and its wake is then still counted: the timer's worker
    lists the inbox) at least that often."""
    times: list[datetime | None] = [w.deadline for w in waiters]
    rechecks = [operation_of(w.kind).recheck_s for w in waiters]
    if found_s := [s for s in rechecks if s is not None]:
        times.append(epoch_to_datetime(now + min(found_s)))
    found = [t for t in times if t is not None]
    return min(found) if found else None


def timer_delay_s(record: TaskRecord, *, now: float, max_delay_s: int = MAX_DELAY_S) -> int:
    """Seconds to delay the next timer: to the deadline, at most one SQS delay, rounded up so
    that it never comes early."""
    assert record.wake_at is not None
    return max(0, min(max_delay_s, math.ceil(record.wake_at.timestamp() - now)))


def after_wait(
    record: TaskRecord,
    inbox: Inbox,
    continuations: Continuations,
    *,
    max_delay_s: int = MAX_DELAY_S,
    look: bool = True,
    long_waits: LongWaits | None = None,
) -> str:
    """After the record was written ``waiting``: look at the inbox and send what continues
    the task: a wake now if it was answered meanwhile, else its timer (if it has a deadline;
    a wait without one needs no message until something arrives), or the schedule the record
    names (``record.schedule``, a deadline past one delayed message), falling back to the
    timer if the schedule cannot be created. Returns what was sent ("wake", "timer",
    "schedule" or "nothing").

    ``look=False`` (a hop): send the timer without looking. The hop looked just before its
    write, and a sender's wake that names the generation the hop replaced still makes the
    worker look (the fence's CHECK_INBOX), so nothing is missed; one LIST per hop saved.
    """
    generation = record.generation
    if look and answered(record, inbox.list(record.task_id)):
        continuations.send(record.task_id, generation=generation, reason="wake", kind="wake")
        return "wake"
    if record.wake_at is None:
        return "nothing"
    if long_waits is not None and long_waits.hand_over(record, kind="timer"):
        return "schedule"
    delay = timer_delay_s(record, now=now_s(), max_delay_s=max_delay_s)
    reason = (
        f"timer for {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(record.wake_at.timestamp()))}"
    )
    continuations.send(
        record.task_id, generation=generation, reason=reason, delay_s=delay, kind="timer"
    )
    return "timer"


def listing_for(
    inbox: Inbox, record: TaskRecord, message: Continuation, poll_s: float, *, now: float
) -> Listing | None:
    """List the task's inbox (at ``now``, epoch s) if this message needs it: a waiting or new
    task, a wake, or a running task whose inbox was not looked at for ``poll_s``."""
    checked = record.inbox_checked_at
    due = checked is None or now - checked >= poll_s
    if record.status in (Status.WAITING, Status.PENDING) or message.kind == "wake" or due:
        listing = inbox.list(record.task_id, at=now)
        if record.status == Status.WAITING:
            refresh_deadlines(record, inbox, listing, now=now)
        return listing
    return None


def undecided(inbox: Inbox, message: Continuation) -> bool:
    """A child's wake: whether its batch still cannot decide (one LIST, no record GET)."""
    hint = message.batch
    assert hint is not None
    reports = batch_counts(inbox.list(message.task_id).keys, hint.prefix)
    return not decisive(reports, count=hint.count, completion=hint.completion)


def waiting_for(record: TaskRecord) -> list[Waiter]:
    """What a task waits for now, then each open callback not among those; a finished task
    waits for nothing (the record keeps its callbacks, so that an answer is told it ended)."""
    if record.status.finished:
        return []
    waiting = record.waiting_for if record.status == Status.WAITING else []
    found = [operation_of(w.kind).shown(w, record) for w in waiting]
    ids = {w.id for w in found if w.id}
    for token, callback in record.callbacks.items():
        callback_id = f"{record.task_id}.{token}"
        if callback_id not in ids:
            found.append(
                Waiter(
                    kind=CALLBACK.kind,
                    name=callback.name,
                    id=callback_id,
                    deadline=callback.deadline(),
                    request=callback.request,
                )
            )
    return found
