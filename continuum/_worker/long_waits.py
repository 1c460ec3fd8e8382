"""Long waits on a scheduler: one one-time schedule instead of a chain of timer hops.

SQS delays a message 900 s at most, so without a scheduler a parked task whose next wake lies
further (a sleep, a callback or signal timeout, a condition's delay, a retry's backoff) hops:
one invocation every 900 s. With a scheduler (``app.scheduler()``) such a deadline is handed to
ONE one-time schedule, whatever its length:

1. **Before the write that parks the task**, :func:`plan` names the schedule in the record
   (``record.schedule``: ``wait_schedule_name`` of task, generation and deadline), so that
   whoever claims the task next knows which schedule may exist, and deletes it.
2. **After the write**, :meth:`LongWaits.hand_over` creates it, set ``lead_s`` before the
   deadline (EventBridge Scheduler fires within the minute after its time), its body the
   signed timer of that generation. Creation is idempotent on the name, time and body (the
   body's ``sent_at`` is the schedule's time), so the fence's re-send after a crash between
   the write and the create creates the same schedule again. A create that fails, however,
   falls back to the delayed timer (the hop chain): no wait is ever lost.
3. **The fire** is a timer that comes early: the worker hops once (generation + 1) and sends
   one delayed message for the rest, so the wait still ends on the second. A fire that comes
   twice, late, or after the task moved on is a stale message, fenced like any other.
4. **A claim** (a wake, a cancel, the deadline itself) deletes the schedule it no longer
   needs, best effort; so does a hop (the schedule it replaces, unless that one fired), and a
   re-send that created one for a generation a hop has since moved past.

A parent's recheck of its children (every ``CHILD_RECHECK_S``) always fits one delayed
message on SQS, so it never needs a schedule; on a queue whose delays are shorter it gets one
like any other deadline.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from continuum._record.continuation import Continuations, MessageKind
from continuum._record.model import TaskRecord

if TYPE_CHECKING:
    from continuum.backends.scheduler import ContinuationScheduler

logger = logging.getLogger("continuum._worker.long_waits")

#: A schedule is set this long before its deadline (EventBridge Scheduler fires within a
#: minute), so that its fire comes early and one delayed message ends the wait on the second.
LEAD_S = 300
#: The reason a scheduled message carries (the fire is recognised by it in the logs).
SCHEDULED = "scheduled"


def lead_s(max_delay_s: int) -> int:
    """How long before its deadline a schedule fires: ``LEAD_S``, or half a short queue's
    longest delay (then what is left after the fire still fits one delayed message)."""
    return max(1, min(LEAD_S, max_delay_s // 2))


def plan(record: TaskRecord, *, now: float, reach_s: int | None) -> None:
    """Name the schedule of a record about to be parked, or none: one is needed when the
    record's next wake lies more than ``reach_s`` (one delayed message) away; ``reach_s``
    None: no scheduler."""
    wake = record.wake_at
    if reach_s is None or wake is None or wake.timestamp() - now <= reach_s:
        record.schedule = None
        return
    from continuum.backends.scheduler import wait_schedule_name  # only a long wait needs it

    record.schedule = wait_schedule_name(
        task_id=record.task_id,
        generation=record.generation,
        wait=f"{record.status.value}@{wake.isoformat()}",
    )


class LongWaits:
    """The app's scheduler as the worker uses it: create a long wait's schedule, delete it.

    Args:
        scheduler: the continuation scheduler, or None (long waits then hop).
        continuations: where continuations go, and their signing keys.
    """

    def __init__(
        self, scheduler: ContinuationScheduler | None, continuations: Continuations
    ) -> None:
        self.scheduler = scheduler
        self.continuations = continuations
        #: schedules whose create failed and fell back to a delayed timer (observed).
        self.fallbacks = 0

    @property
    def reach_s(self) -> int | None:
        """How far one delayed message reaches; None without a scheduler (nothing planned)."""
        return None if self.scheduler is None else self.continuations.queue.max_delay_s

    def hand_over(self, record: TaskRecord, *, kind: MessageKind) -> bool:
        """Create the schedule ``record.schedule`` names, to send ``kind`` for the record's
        generation ``lead_s`` before its wake. False: nothing was created (no schedule
        planned, no scheduler, or the create failed: the caller sends the delayed timer)."""
        name, wake = record.schedule, record.wake_at
        if name is None or wake is None or self.scheduler is None:
            return False
        from continuum.backends.scheduler import SchedulerError

        at = wake - timedelta(seconds=lead_s(self.continuations.queue.max_delay_s))
        at = at.replace(microsecond=0)  # whole seconds: the body's sent_at is the schedule's time
        body = self.continuations.body(
            record.task_id,
            generation=record.generation,
            reason=f"{SCHEDULED} {kind} for {wake.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            kind=kind,
            sent_at=at.timestamp(),
        )
        try:
            self.scheduler.schedule_at(name=name, at=at, message_body=body)
        except SchedulerError as exc:
            self.fallbacks += 1
            logger.warning(
                f"could not create the wait's schedule; hopping on delayed timers: {exc}",
                extra={"schedule": name, "task_id": record.task_id, "fallback": "timer"},
            )
            return False
        return True

    def forget(self, name: str | None, *, task_id: str) -> None:
        """Delete a schedule no longer needed, best effort: a fire that comes anyway is fenced."""
        if name is None or self.scheduler is None:
            return
        from continuum.backends.scheduler import SchedulerError

        try:
            self.scheduler.delete(name)
        except SchedulerError as exc:
            logger.info(
                f"could not delete a schedule no longer needed (its fire will be fenced): {exc}",
                extra={"schedule": name, "task_id": task_id},
            )
