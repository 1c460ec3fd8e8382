"""Recurring schedules' expressions: ``rate(...)`` and ``cron(...)``, checked and counted.

Both backends check an expression here before it is stored, so that a malformed one fails alike
on AWS and in memory, naming the schedule; the local firing counts a schedule's times here.
The rules are EventBridge Scheduler's: a rate is a positive whole number of minutes, hours or
days (singular for 1); a cron has six fields, minutes hours day-of-month month day-of-week
year, exactly one of the two day fields ``?``, read in the schedule's time zone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from continuum.backends.scheduler import InvalidSchedule

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
_RATE_UNITS = {"minute": 60, "hour": 3600, "day": 86400}


def rate_expression(name: str, every: timedelta) -> str:
    """``rate(N unit)`` for ``every``, in the largest unit that divides it.

    Raises InvalidSchedule for what a rate cannot say: under a minute, or not whole minutes.

    Example:
        >>> rate_expression("report", timedelta(hours=2))
        'rate(2 hours)'
    """
    seconds = every.total_seconds()
    if seconds < 60 or seconds % 60:
        raise InvalidSchedule(
            f"every={every!r} cannot be a schedule: EventBridge Scheduler's rates are whole "
            "minutes, hours or days, at least one minute (use a multiple of a minute)",
            schedule=name,
        )
    whole = int(seconds)
    for unit in ("day", "hour", "minute"):
        size = _RATE_UNITS[unit]
        if whole % size == 0:
            count = whole // size
            return f"rate({count} {unit if count == 1 else unit + 's'})"
    raise AssertionError("unreachable: every whole minute divides")  # pragma: no cover


def recurring_expression(
    name: str, *, cron: str | None = None, every: timedelta | None = None
) -> str:
    """The expression of a schedule declared with one of ``cron`` and ``every``, checked."""
    if (cron is None) == (every is None):
        raise InvalidSchedule("give exactly one of cron=... and every=...", schedule=name)
    if every is not None:
        return rate_expression(name, every)
    assert cron is not None
    return check_recurring(name, cron)


def check_recurring(name: str, expression: str) -> str:
    """``expression``, if it is a well-formed ``rate(...)`` or ``cron(...)``.

    Raises InvalidSchedule, naming the schedule and what is wrong.
    """
    rate = _RATE.match(expression)
    if rate is not None:
        count, unit = int(rate.group(1)), rate.group(2)
        if count < 1 or (count == 1) == unit.endswith("s"):
            raise InvalidSchedule(
                f"{expression!r}: a rate is a positive count, singular for 1 ('rate(1 hour)') "
                "and plural above ('rate(5 minutes)')",
                schedule=name,
            )
        return expression
    if _CRON.match(expression):
        parse_cron(name, expression)
        return expression
    raise InvalidSchedule(
        f"{expression!r} is neither 'cron(...)' (e.g. 'cron(0 9 * * ? *)') nor 'rate(...)' "
        "(e.g. 'rate(5 minutes)')",
        schedule=name,
    )


def rate_period(expression: str) -> timedelta | None:
    """A ``rate(...)`` expression's period (None for any other expression)."""
    rate = _RATE.match(expression)
    if rate is None:
        return None
    return timedelta(seconds=int(rate.group(1)) * _RATE_UNITS[rate.group(2).rstrip("s")])


# -- cron: EventBridge Scheduler's six fields ------------------------------------------------------

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
    )
}
_WEEKDAYS = {d: i + 1 for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
#: (field, lowest, highest, names) for minutes, hours, day of month, month, day of week, year.
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minutes", 0, 59, {}),
    ("hours", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 1, 7, _WEEKDAYS),
    ("year", 1970, 2199, {}),
)


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed ``cron(...)``: the values each field allows.

    ``days`` None means the day of month is ``?`` (the day of week decides), ``weekdays`` None
    the other way round; ``last_day`` is ``L`` in the day of month. Weekdays count 1 = Sunday.
    """

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int] | None
    last_day: bool
    months: frozenset[int]
    weekdays: frozenset[int] | None
    years: frozenset[int]


def parse_cron(name: str, expression: str) -> Cron:
    """Parse EventBridge Scheduler's ``cron(minutes hours day-of-month month day-of-week year)``.

    Takes ``*``, ``?``, numbers, names (``JAN``, ``MON``), ranges, lists, steps (``0/15``) and
    ``L`` as the day of month. Raises InvalidSchedule, naming the field, for anything else
    (``W``, ``#`` and ``L`` in the day of week too: continuum cannot fire those locally).
    """
    match = _CRON.match(expression)
    fields = match.group(1).split() if match else []
    if len(fields) != len(_FIELDS):
        raise InvalidSchedule(
            f"{expression!r}: a cron expression has six fields, minutes hours day-of-month month "
            "day-of-week year (e.g. 'cron(0 9 * * ? *)')",
            schedule=name,
        )
    day_field, weekday_field = fields[2], fields[4]
    if (day_field == "?") == (weekday_field == "?"):
        raise InvalidSchedule(
            f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'",
            schedule=name,
        )
    minutes, hours, days, months, weekdays, years = (
        frozenset[int]()
        if (text == "?" and spec[0].startswith("day"))
        or (spec[0] == "day-of-month" and text == "L")
        else _parse_field(name, expression, text, *spec)
        for text, spec in zip(fields, _FIELDS, strict=True)
    )
    return Cron(
        minutes=minutes,
        hours=hours,
        days=None if day_field in ("?", "L") else days,
        last_day=day_field == "L",
        months=months,
        weekdays=None if weekday_field == "?" else weekdays,
        years=years,
    )


def _parse_field(
    name: str, expression: str, text: str, field: str, low: int, high: int, names: dict[str, int]
) -> frozenset[int]:
    def bad(why: str) -> InvalidSchedule:
        return InvalidSchedule(f"{expression!r}: the {field} field {text!r} {why}", schedule=name)

    def number(part: str) -> int:
        value = names.get(part.upper()) if names else None
        if value is None and any(mark in part.upper() for mark in "LW#"):
            raise bad("uses L, W or #: continuum takes only L alone, as the day of month")
        if value is None:
            if not part.isdigit():
                raise bad(f"has {part!r}, not a number from {low} to {high}")
            value = int(part)
        if not low <= value <= high:
            raise bad(f"has {value}, outside {low} to {high}")
        return value

    allowed: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        if step_text and not (step_text.isdigit() and int(step_text) > 0):
            raise bad("has a step that is not a positive number")
        step = int(step_text) if step_text else 1
        if base == "*":
            first, last = low, high
        elif "-" in base:
            start, _, end = base.partition("-")
            first, last = number(start), number(end)
            if first > last:
                raise bad(f"has the range {base!r}, which runs backwards")
        else:
            first = number(base)
            last = high if step_text else first
        allowed.update(range(first, last + 1, step))
    return frozenset(allowed)


def cron_times(cron: Cron, timezone: str, after: datetime, until: datetime) -> list[datetime]:
    """The times (UTC) of ``cron`` read in ``timezone``, later than ``after``, up to ``until``.

    As EventBridge Scheduler fires them across a daylight saving change: a wall time the
    change skips does not fire that day, and a wall time it repeats fires once, the first
    time it comes (EventBridge documents "only once"; the first is continuum's choice).
    """
    return list(_cron_times(cron, timezone, after, until))


def next_cron_time(cron: Cron, timezone: str, after: datetime, until: datetime) -> datetime | None:
    """The first of ``cron_times``, made without making the others (None: none to ``until``)."""
    return next(_cron_times(cron, timezone, after, until), None)


def _cron_times(cron: Cron, timezone: str, after: datetime, until: datetime) -> Iterator[datetime]:
    """``cron_times`` in time order, one at a time."""
    zone = ZoneInfo(timezone)
    day = after.astimezone(zone).date()
    last_day = until.astimezone(zone).date()
    while day <= last_day:
        if _cron_day(cron, day.year, day.month, day.day, day.isoweekday()):
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                    when = local.astimezone(UTC)  # fold 0: a repeated wall time's first
                    if when.astimezone(zone).time() != local.time():
                        continue  # in a spring gap: this wall time does not exist that day
                    if after < when <= until:
                        yield when
        day += timedelta(days=1)


def _cron_day(cron: Cron, year: int, month: int, day: int, isoweekday: int) -> bool:
    if year not in cron.years or month not in cron.months:
        return False
    if cron.weekdays is not None:
        return isoweekday % 7 + 1 in cron.weekdays  # ISO Monday 1 .. Sunday 7 -> Sunday 1
    if cron.last_day:
        return (datetime(year, month, day) + timedelta(days=1)).month != month
    return cron.days is not None and day in cron.days


def rate_times(
    period: timedelta, anchor: datetime, after: datetime, until: datetime
) -> list[datetime]:
    """A rate's times counted from ``anchor`` (its first), later than ``after``, to ``until``."""
    start = max(0, math.floor((after - anchor) / period) + 1) if after >= anchor else 0
    times: list[datetime] = []
    when = anchor + start * period
    while when <= until:
        if when > after:
            times.append(when)
        when += period
    return times


def next_rate_time(period: timedelta, anchor: datetime, after: datetime) -> datetime:
    """A rate's first time later than ``after``, counted from ``anchor`` (its first).

    Example:
        >>> start = datetime(2026, 1, 1, tzinfo=UTC)
        >>> next_rate_time(timedelta(minutes=1), start, start + timedelta(seconds=90))
        datetime.datetime(2026, 1, 1, 0, 2, tzinfo=datetime.timezone.utc)
    """
    if after < anchor:
        return anchor
    return anchor + ((after - anchor) // period + 1) * period
