"""The continuation scheduler: schedules whose fires send a continuation to the queue.

:class:`ContinuationScheduler` is the one seam to a scheduler. Its semantics are EventBridge
Scheduler's, in one schedule group of the stack, every schedule targeting the continuation
queue:

1. A one-time schedule (``schedule_at``) fires once at its time (``at(...)``, UTC, whole
   seconds; AWS fires within the minute) and is then deleted. Its name says what it wakes (see
   :func:`wait_schedule_name`), so creating it again with the same time and body is not an
   error (a retried create after a lost answer), and a different schedule under a taken name
   is refused (:class:`ScheduleConflict`), never written over.
2. A recurring schedule (``put_recurring``) fires at each time of its ``cron(...)`` or
   ``rate(...)`` expression, in its time zone, while it is enabled; ``pause`` and ``resume``
   disable and enable it.
3. A fire sends the schedule's body to the queue, with :data:`SCHEDULED_TIME` replaced by the
   time the fire was scheduled for (``2027-01-15T08:00:00Z``): a recurring fire says which of
   its times it is, so that a duplicated fire can be recognised.
4. ``delete`` is best effort: deleting a schedule that is gone (fired, or never made) is fine.
   A fire that comes anyway is a stale message, fenced like any other.

A recurring schedule's expression is checked, and its times counted, in ``recurrence``.
``eventbridge.EventBridgeScheduler`` implements it on AWS (and on moto, which stores schedules
but never fires them); ``memory.scheduler.InMemoryScheduler`` in memory. ``memory.scheduler``'s
``ScheduleFirer`` fires what is due on either, on the clock it is given.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: EventBridge Scheduler writes a fire's scheduled time where a target's input holds this.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: How EventBridge Scheduler writes that time.
SCHEDULED_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: EventBridge Scheduler's rule for a schedule's name.
_NAME = re.compile(r"^[0-9A-Za-z_.-]{1,64}$")
#: A one-time schedule's expression, as EventBridge Scheduler writes it.
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_AT_FORMAT = "%Y-%m-%dT%H:%M:%S"
#: A readable prefix of the task id in a wait's schedule name; the digest keeps it unique.
_NAME_TASK_CHARS = 30
_NAME_DIGEST_CHARS = 16


class SchedulerError(Exception):
    """A scheduler operation failed: the schedule it concerned and what was wrong.

    Attributes:
        schedule: the schedule's name, when one is concerned.
    """

    def __init__(self, message: str, *, schedule: str | None = None) -> None:
        self.schedule = schedule
        super().__init__(f"schedule {schedule!r}: {message}" if schedule else message)


class TransientSchedulerError(SchedulerError):
    """Worth trying again: throttling, a 5xx, a connection that failed."""


class InvalidSchedule(SchedulerError):
    """A schedule EventBridge Scheduler cannot take: its name, time, expression or body."""


class ScheduleConflict(SchedulerError):
    """A different schedule already has this name; it was kept as it was."""


class ScheduleNotFound(SchedulerError):
    """No schedule has this name in the group (to pause or resume)."""


class ScheduleState(StrEnum):
    """Whether a schedule fires (EventBridge Scheduler's ``State``)."""

    ENABLED = "ENABLED"
    DISABLED = "DISABLED"


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as stored: what fires when, and what a fire sends.

    Attributes:
        name: its name in the group.
        expression: ``at(...)``, ``rate(...)`` or ``cron(...)``.
        message_body: what a fire sends to the queue (holding :data:`SCHEDULED_TIME` or not).
        timezone: the time zone its expression is read in.
        state: enabled or disabled.
        created_at: when it was created (UTC); a rate counts from here.
        updated_at: when it was last changed (UTC).
    """

    name: str
    expression: str
    message_body: str
    timezone: str
    state: ScheduleState
    created_at: datetime
    updated_at: datetime

    @property
    def one_time(self) -> bool:
        """Whether it fires once (``at(...)``) and is then deleted."""
        return self.expression.startswith("at(")

    @property
    def at(self) -> datetime | None:
        """A one-time schedule's time, in UTC (None for a recurring one)."""
        match = _AT.match(self.expression)
        if match is None:
            return None
        local = datetime.strptime(match.group(1), _AT_FORMAT)
        return local.replace(tzinfo=ZoneInfo(self.timezone)).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire of a schedule: which, the time it was scheduled for, and the body it sent."""

    name: str
    scheduled_time: datetime
    body: str


class ContinuationScheduler(Protocol):
    """Schedules in one group, each sending a continuation to the queue when it fires."""

    def schedule_at(self, *, name: str, at: datetime, message_body: str) -> None:
        """Create a one-time schedule that sends ``message_body`` at ``at`` and is then deleted.

        ``at`` must be timezone-aware; a fraction of a second rounds up (never early).
        Creating the same schedule again is not an error. Raises InvalidSchedule,
        ScheduleConflict (another schedule has the name), SchedulerError.
        """
        ...

    def put_recurring(
        self,
        *,
        name: str,
        expression: str,
        message_body: str,
        timezone: str = "UTC",
        state: ScheduleState | None = None,
    ) -> None:
        """Create or replace a recurring schedule (``cron(...)`` or ``rate(...)``).

        ``state`` None keeps a replaced schedule's state (a new one is enabled). Raises
        InvalidSchedule, SchedulerError.
        """
        ...

    def pause(self, name: str) -> None:
        """Disable a schedule: it does not fire until resumed. Raises ScheduleNotFound."""
        ...

    def resume(self, name: str) -> None:
        """Enable a schedule again, from its next time on. Raises ScheduleNotFound."""
        ...

    def get(self, name: str) -> Schedule | None:
        """The schedule of that name in the group, or None."""
        ...

    def schedules(self, *, name_prefix: str = "") -> list[Schedule]:
        """The group's schedules (those whose name starts with ``name_prefix``), by name."""
        ...

    def delete(self, name: str) -> None:
        """Delete a schedule; one that is already gone is fine. Raises SchedulerError."""
        ...


# -- names, bodies and one-time expressions: checked alike on every backend -----------------------


def wait_schedule_name(*, task_id: str, generation: int, wait: str) -> str:
    """The name of the one-time schedule that ends a task's wait, the same at every retry.

    Readable (the task id's first characters) and unique (a digest of all three), within
    EventBridge Scheduler's 64 characters of letters, digits, ``-``, ``_`` and ``.``.

    Example:
        >>> wait_schedule_name(task_id="order-42", generation=7, wait="sleep:ship")
        'order-42-g7-f2769c3e771b74fb'
    """
    digest = hashlib.sha256(f"{task_id}\n{generation}\n{wait}".encode()).hexdigest()
    readable = re.sub(r"[^0-9A-Za-z_.-]", "_", task_id)[:_NAME_TASK_CHARS]
    return f"{readable}-g{generation}-{digest[:_NAME_DIGEST_CHARS]}"


def check_recreate(existing: Schedule, *, expression: str, message_body: str) -> None:
    """Creating a one-time schedule again: fine if it is the same one, refused if not.

    Raises ScheduleConflict, naming the schedule that was kept.
    """
    if existing.expression != expression or existing.message_body != message_body:
        raise ScheduleConflict(
            f"a different schedule has this name ({existing.expression}); it was kept. A "
            "wait's schedule is named after its task, generation and wait "
            "(wait_schedule_name), so that two waits never share one",
            schedule=existing.name,
        )


def check_replaceable(existing: Schedule) -> None:
    """A recurring schedule may replace ``existing`` unless it is a one-time schedule."""
    if existing.one_time:
        raise ScheduleConflict(
            f"a one-time schedule has this name ({existing.expression}); it was kept",
            schedule=existing.name,
        )


def check_name(name: str) -> str:
    """``name``, if EventBridge Scheduler takes it as a schedule's name. Raises InvalidSchedule."""
    if not _NAME.match(name):
        raise InvalidSchedule(
            "a schedule's name is 1 to 64 letters, digits, '-', '_' or '.'", schedule=name
        )
    return name


def check_body(name: str, message_body: str) -> str:
    """``message_body``, if a target can send it (not empty). Raises InvalidSchedule."""
    if not message_body:
        raise InvalidSchedule("the message body is empty", schedule=name)
    return message_body


def check_timezone(name: str, timezone: str) -> str:
    """``timezone``, if it is an IANA time zone name. Raises InvalidSchedule."""
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidSchedule(
            f"unknown time zone {timezone!r} (an IANA name, e.g. 'Europe/Paris')", schedule=name
        ) from exc
    return timezone


def at_expression(name: str, at: datetime) -> str:
    """``at(yyyy-mm-ddThh:mm:ss)`` in UTC, a fraction of a second rounded up.

    Raises InvalidSchedule for a naive datetime (its zone would be a guess).
    """
    if at.tzinfo is None or at.utcoffset() is None:
        raise InvalidSchedule(
            f"the time {at.isoformat()} has no time zone (give an aware datetime, e.g. in UTC)",
            schedule=name,
        )
    utc = at.astimezone(UTC)
    if utc.microsecond:
        utc = utc.replace(microsecond=0) + timedelta(seconds=1)
    return f"at({utc.strftime(_AT_FORMAT)})"


def scheduled_time_text(when: datetime) -> str:
    """A scheduled time as EventBridge Scheduler writes it in a fire's input."""
    return when.astimezone(UTC).strftime(SCHEDULED_TIME_FORMAT)


def parse_scheduled_time(text: str) -> datetime:
    """The UTC datetime a fire's ``<aws.scheduler.scheduled-time>`` became."""
    return datetime.strptime(text, SCHEDULED_TIME_FORMAT).replace(tzinfo=UTC)
