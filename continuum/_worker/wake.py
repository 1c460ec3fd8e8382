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

import math
import time
from datetime import datetime
from enum import StrEnum

from continuum._base.clock import now_s
from continuum._fanout.child_tasks import batch_counts, decisive
from continuum._record.continuation import Continuation, Continuations
from continuum._record.inbox import Inbox, Listing
from continuum._record.model import Status, TaskRecord
from continuum._record.waiting_for import Waiter, WaitKind, epoch_to_datetime
from continuum._worker.long_waits import LongWaits
from continuum.backends.queue import MAX_DELAY_S

#: A task waiting for child tasks has its inbox looked at this often, whatever its deadlines.
CHILD_RECHECK_S = 900.0
#: A timer may come this much before its deadline and still count as due (clock skew between
#: SQS and the worker); the wait itself sleeps what is left in place.
EARLY_S = 0.5


class Decision(StrEnum):
    RUN = "run"
    HOP = "hop"
    IGNORE = "ignore"


def token_of(callback_id: str | None) -> str:
    return (callback_id or "").rsplit(".", 1)[-1]


def answered(record: TaskRecord, listing: Listing) -> bool:
    """Whether the inbox holds something a waiter of ``record`` waits for (or a cancel)."""
    if listing.has_cancel and (record.cancel is None or not record.cancel.delivered):
        return True
    taken = set(record.signals_taken)
    for waiter in record.waiting_for:
        if waiter.kind == WaitKind.CALLBACK and listing.has_answer(token_of(waiter.id)):
            return True
        if waiter.kind == WaitKind.SIGNAL and any(
            key not in taken for key in listing.signal_keys(waiter.name)
        ):
            return True
        if waiter.kind == WaitKind.CHILD and waiter.id is not None:
            reports = batch_counts(listing.keys, waiter.id)
            if decisive(reports, count=waiter.count or 1, completion=waiter.completion):
                return True
    return False


def refresh_deadlines(record: TaskRecord, inbox: Inbox, listing: Listing, *, now: float) -> None:
    """Move callback deadlines by the heartbeats that came, and recompute ``wake_at``."""
    for waiter in record.waiting_for:
        if waiter.kind != WaitKind.CALLBACK:
            continue
        token = token_of(waiter.id)
        callback = record.callbacks.get(token)
        if callback is None or callback.heartbeat_timeout_s is None:
            continue
        if listing.has_heartbeat(token):
            beat = inbox.heartbeat(record.task_id, token)
            if beat is not None and (callback.heartbeat_at is None or beat > callback.heartbeat_at):
                callback.heartbeat_at = beat
                waiter.deadline = callback.deadline()
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
    child tasks at least every ``CHILD_RECHECK_S`` (a child that died between its result and
    its wake is then still counted: the timer's worker lists the inbox)."""
    times: list[datetime | None] = [w.deadline for w in waiters]
    if any(w.kind == WaitKind.CHILD for w in waiters):
        times.append(epoch_to_datetime(now + CHILD_RECHECK_S))
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
    """What a task waits for now, then each open callback not among those."""
    found = list(record.waiting_for) if record.status == Status.WAITING else []
    for i, waiter in enumerate(found):
        callback = record.callbacks.get(token_of(waiter.id))
        if waiter.kind == WaitKind.CALLBACK and waiter.request is None and callback is not None:
            # A record written before waiters carried requests: its callback has one.
            found[i] = waiter.model_copy(update={"request": callback.request})
    ids = {w.id for w in found if w.id}
    for token, callback in record.callbacks.items():
        callback_id = f"{record.task_id}.{token}"
        if callback_id not in ids:
            found.append(
                Waiter(
                    kind=WaitKind.CALLBACK,
                    name=callback.name,
                    id=callback_id,
                    deadline=callback.deadline(),
                    request=callback.request,
                )
            )
    return found
