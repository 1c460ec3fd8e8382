"""EventBridge Scheduler in memory, and the firing that moto leaves out.

:class:`InMemoryScheduler` keeps schedules behind the ContinuationScheduler protocol.
:class:`ScheduleFirer` fires what is due on any ContinuationScheduler, on the clock it is
given: the in-memory one fires through it, and so does a local run on moto, which stores
schedules but never fires them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from continuum.backends.memory.clock import Clock, Hook, wall_clock
from continuum.backends.queue import ContinuationQueue
from continuum.backends.recurrence import (
    check_recurring,
    cron_times,
    next_cron_time,
    next_rate_time,
    parse_cron,
    rate_period,
    rate_times,
)
from continuum.backends.scheduler import (
    SCHEDULED_TIME,
    ContinuationScheduler,
    Fire,
    Schedule,
    ScheduleNotFound,
    ScheduleState,
    at_expression,
    check_body,
    check_name,
    check_recreate,
    check_replaceable,
    check_timezone,
    scheduled_time_text,
)

#: A rate's first time is its creation; a cursor just before it lets that time be due.
_BEFORE = timedelta(microseconds=1)


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


class InMemoryScheduler:
    """EventBridge Scheduler's schedules in memory, behind the ContinuationScheduler protocol.

    Args:
        clock: epoch seconds (default: the real clock); creation times and fires follow it.
        on_call: a fault hook, called with ``(operation, schedule name)``.

    Example (a sketch; ``tests/backends/test_scheduler_contract.py`` runs it for real)::

        clock = ManualClock()
        scheduler = InMemoryScheduler(clock=clock)
        scheduler.schedule_at(name="w1", at=at, message_body=body)
        clock.advance(3600)
        ScheduleFirer(scheduler, clock=clock).fire_due(queue)
    """

    def __init__(self, *, clock: Clock | None = None, on_call: Hook | None = None) -> None:
        self.clock = clock or wall_clock
        self.on_call = on_call
        self._schedules: dict[str, Schedule] = {}
        self._lock = threading.Lock()
        self.firer = ScheduleFirer(self, clock=self.clock)

    def schedule_at(self, *, name: str, at: datetime, message_body: str) -> None:
        self._hook("schedule_at", name)
        expression = at_expression(check_name(name), at)
        check_body(name, message_body)
        now = _utc(self.clock())
        with self._lock:
            existing = self._schedules.get(name)
            if existing is not None:
                check_recreate(existing, expression=expression, message_body=message_body)
                return
            self._schedules[name] = Schedule(
                name, expression, message_body, "UTC", ScheduleState.ENABLED, now, now
            )

    def put_recurring(
        self,
        *,
        name: str,
        expression: str,
        message_body: str,
        timezone: str = "UTC",
        state: ScheduleState | None = None,
    ) -> None:
        self._hook("put_recurring", name)
        check_recurring(check_name(name), expression)
        check_body(name, message_body)
        check_timezone(name, timezone)
        now = _utc(self.clock())
        with self._lock:
            existing = self._schedules.get(name)
            if existing is None:
                self._schedules[name] = Schedule(
                    name,
                    expression,
                    message_body,
                    timezone,
                    state or ScheduleState.ENABLED,
                    now,
                    now,
                )
                return
            check_replaceable(existing)
            self._schedules[name] = replace(
                existing,
                expression=expression,
                message_body=message_body,
                timezone=timezone,
                state=state or existing.state,
                updated_at=now,
            )

    def pause(self, name: str) -> None:
        self._hook("pause", name)
        self._set_state(name, ScheduleState.DISABLED)

    def resume(self, name: str) -> None:
        self._hook("resume", name)
        self._set_state(name, ScheduleState.ENABLED)

    def get(self, name: str) -> Schedule | None:
        self._hook("get", name)
        with self._lock:
            return self._schedules.get(name)

    def schedules(self, *, name_prefix: str = "") -> list[Schedule]:
        self._hook("schedules", name_prefix)
        with self._lock:
            return sorted(
                (s for s in self._schedules.values() if s.name.startswith(name_prefix)),
                key=lambda s: s.name,
            )

    def delete(self, name: str) -> None:
        self._hook("delete", name)
        with self._lock:
            self._schedules.pop(name, None)

    # -- firing, on this scheduler's clock ------------------------------------------------------

    def due(self, now: datetime | None = None) -> list[Fire]:
        """What would fire now (or at ``now``), without firing it."""
        return self.firer.due(now)

    def fire_due(self, queue: ContinuationQueue, *, now: datetime | None = None) -> list[Fire]:
        """Send what is due to ``queue``; one-time schedules are then deleted."""
        return self.firer.fire_due(queue, now=now)

    def next_due_at(self) -> datetime | None:
        """The next time something fires (None: nothing enabled), for a virtual clock."""
        return self.firer.next_due_at()

    def __len__(self) -> int:
        with self._lock:
            return len(self._schedules)

    def _set_state(self, name: str, state: ScheduleState) -> None:
        with self._lock:
            existing = self._schedules.get(name)
            if existing is None:
                raise ScheduleNotFound("no such schedule in the group", schedule=name)
            self._schedules[name] = replace(existing, state=state, updated_at=_utc(self.clock()))

    def _hook(self, operation: str, name: str) -> None:
        if self.on_call is not None:
            self.on_call(operation, name)


@dataclass(slots=True)
class _Cursor:
    """Where a recurring schedule's firing stands: its times up to ``after`` were delivered."""

    created: datetime
    #: the schedule's last modification (EventBridge's LastModificationDate) when last looked at.
    modified: datetime
    after: datetime


class ScheduleFirer:
    """Fires a scheduler's due schedules into the queue, as EventBridge Scheduler would.

    Each recurring schedule's times are delivered once each, in order; a disabled schedule's
    times pass undelivered; as EventBridge Scheduler, a schedule fires from its last
    modification on (``updated_at``: its creation, a change, a pause or a resume), whether or
    not a firing saw it paused. A time that fell due before the firer was made (its clock's now
    then) is not delivered: nothing ran to deliver it, as after a restart. Where
    the clock jumps past several times of one schedule (a virtual clock), ``catch_up`` keeps
    only that many of the latest (None: all of them).

    Args:
        scheduler: the schedules to fire (in memory, or EventBridge Scheduler on moto).
        clock: epoch seconds (default: the real clock).
        catch_up: how many of one schedule's missed times one call delivers at most.

    Example (a sketch)::

        firer = ScheduleFirer(EventBridgeScheduler(client, ...), clock=clock)
        firer.fire_due(queue)
    """

    def __init__(
        self,
        scheduler: ContinuationScheduler,
        *,
        clock: Clock | None = None,
        catch_up: int | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.clock = clock or wall_clock
        self.catch_up = catch_up
        #: a time that fell due before this firer started was missed: nothing ran to fire it.
        self.started = _utc(self.clock())
        self._cursors: dict[str, _Cursor] = {}
        self._lock = threading.Lock()

    def due(self, now: datetime | None = None) -> list[Fire]:
        """What would fire at ``now`` (default: the clock's now), without firing it."""
        when = now or _utc(self.clock())
        with self._lock:
            return [fire for fire, _ in self._due(when)[0]]

    def fire_due(
        self, queue: ContinuationQueue, *, now: datetime | None = None, recurring: bool = True
    ) -> list[Fire]:
        """Send each due fire's body to ``queue``; delete fired one-time schedules.

        ``recurring=False`` fires the one-time schedules only: the recurring ones' due times
        pass undelivered, as a paused schedule's.
        """
        when = now or _utc(self.clock())
        with self._lock:
            due, recurring_ones = self._due(when, recurring=recurring)
            fired: list[Fire] = []
            for fire, schedule in due:
                queue.send(fire.body)
                fired.append(fire)
                if schedule.one_time:
                    self.scheduler.delete(schedule.name)
                else:
                    self._cursor(schedule).after = fire.scheduled_time
            for schedule in recurring_ones:  # times paused or left out by catch_up pass too
                cursor = self._cursor(schedule)
                cursor.after = max(cursor.after, when)
            return fired

    def next_due_at(self, *, recurring: bool = True) -> datetime | None:
        """The next time one of the enabled schedules fires (None: none will); with
        ``recurring=False``, one of the one-time schedules."""
        with self._lock:
            soonest: datetime | None = None
            for schedule in self.scheduler.schedules():
                if schedule.state is not ScheduleState.ENABLED:
                    continue
                if not (recurring or schedule.one_time):
                    continue
                if schedule.one_time:
                    upcoming = schedule.at
                else:
                    cursor = self._cursor(schedule)
                    upcoming = _next_time(schedule, cursor.after)
                if upcoming is not None and (soonest is None or upcoming < soonest):
                    soonest = upcoming
            return soonest

    def _due(
        self, now: datetime, *, recurring: bool = True
    ) -> tuple[list[tuple[Fire, Schedule]], list[Schedule]]:
        """The fires due at ``now`` in time order, and the recurring schedules looked at."""
        due: list[tuple[Fire, Schedule]] = []
        looked_at: list[Schedule] = []
        for schedule in self.scheduler.schedules():
            if schedule.one_time:
                at = schedule.at
                if schedule.state is ScheduleState.ENABLED and at is not None and at <= now:
                    due.append((_fire(schedule, at), schedule))
                continue
            looked_at.append(schedule)
            if schedule.state is not ScheduleState.ENABLED or not recurring:
                continue  # its times pass undelivered (fire_due moves its cursor past them)
            times = _times(schedule, self._cursor(schedule).after, now)
            if self.catch_up is not None:
                times = times[-self.catch_up :] if self.catch_up > 0 else []
            due.extend((_fire(schedule, when), schedule) for when in times)
        due.sort(key=lambda pair: (pair[0].scheduled_time, pair[0].name))
        return due, looked_at

    def _cursor(self, schedule: Schedule) -> _Cursor:
        created = schedule.created_at.astimezone(UTC)
        modified = schedule.updated_at.astimezone(UTC)
        cursor = self._cursors.get(schedule.name)
        if cursor is None or cursor.created != created:  # new to this firer, or made again
            after = _anchor(schedule) - _BEFORE
            if modified > created:  # changed before this firer first saw it
                after = max(after, modified)
            if created < self.started:  # what fell due while no firer ran is not fired
                after = max(after, self.started - _BEFORE)
            cursor = _Cursor(created, modified, after)
            self._cursors[schedule.name] = cursor
        elif cursor.modified != modified:
            # Changed, paused or resumed since the last look, seen or not: EventBridge Scheduler
            # fires from its last modification on, never a time before it.
            cursor.after = max(cursor.after, modified)
            cursor.modified = modified
        return cursor


def _anchor(schedule: Schedule) -> datetime:
    return schedule.created_at.astimezone(UTC).replace(microsecond=0)


def _times(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    period = rate_period(schedule.expression)
    if period is not None:
        return rate_times(period, _anchor(schedule), after, until)
    cron = parse_cron(schedule.name, schedule.expression)
    return cron_times(cron, schedule.timezone, after, until)


def _next_time(schedule: Schedule, after: datetime) -> datetime | None:
    """The first time after ``after`` (a cron's looked for up to ten years ahead)."""
    period = rate_period(schedule.expression)
    if period is not None:
        return next_rate_time(period, _anchor(schedule), after)
    cron = parse_cron(schedule.name, schedule.expression)
    return next_cron_time(cron, schedule.timezone, after, after + timedelta(days=3653))


def _fire(schedule: Schedule, when: datetime) -> Fire:
    body = schedule.message_body.replace(SCHEDULED_TIME, scheduled_time_text(when))
    return Fire(schedule.name, when, body)
