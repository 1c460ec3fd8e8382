"""The stack's recurring schedules made what the app declares, and what they are doing.

:func:`sync_schedules` creates the declared schedules that are missing, updates the changed
ones and deletes those continuum made that the app no longer declares; a second sync changes
nothing. It touches only the schedules named :data:`SCHEDULE_PREFIX` + a declaration's name,
never the one-time schedules of waits in the same group. A paused schedule stays paused, even
when its declaration changed: a pause is an operator's, undone by ``resume``.
:func:`schedule_rows` is what ``continuum schedules list`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from continuum._base.clock import utcnow
from continuum._define.recurring import SCHEDULE_PREFIX, ScheduleDeclaration, check_input
from continuum._define.settings import Settings
from continuum._record.continuation import schedule_fire_body
from continuum._record.persistence import Records
from continuum._record.schedule_runs import ScheduleRuns
from continuum._turn.tasks import Registry
from continuum.backends.recurrence import cron_times, parse_cron, rate_period, rate_times
from continuum.backends.scheduler import ContinuationScheduler, Schedule
from continuum.errors import ConfigurationError, RecordNotFoundError, UnknownTaskError


class DeclaresSchedules(Protocol):
    """What a sync reads of an app: its registry and its settings (the signing keys)."""

    @property
    def registry(self) -> Registry: ...

    @property
    def settings(self) -> Settings: ...


@dataclass(frozen=True)
class SyncReport:
    """What a sync did, by schedule (declaration) name.

    Attributes:
        created: declared, and made.
        updated: changed (expression, time zone, or body: the signing key), and replaced.
        deleted: made by continuum, no longer declared, and deleted.
        unchanged: already as declared.
        paused: of those kept or updated, the ones that stay paused.
    """

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the sync changed anything."""
        return bool(self.created or self.updated or self.deleted)


def checked_declarations(app: DeclaresSchedules) -> list[ScheduleDeclaration]:
    """The app's schedules, each checked against its task (known, its input valid).

    Raises:
        ConfigurationError: naming the schedule whose task is unknown or input invalid.
    """
    declarations = []
    for declaration in sorted(app.registry.schedules.values(), key=lambda d: d.name):
        try:
            task = app.registry.task(declaration.task_name)
        except UnknownTaskError as exc:
            raise ConfigurationError(f"schedule {declaration.name!r}: {exc.message}") from None
        check_input(declaration, task.state_model)
        declarations.append(declaration)
    return declarations


def sync_schedules(app: DeclaresSchedules, scheduler: ContinuationScheduler) -> SyncReport:
    """Make the scheduler's recurring schedules what ``app`` declares (idempotent).

    Raises:
        ConfigurationError: a declaration's task is unknown or its input invalid (nothing
            is changed then).
        SchedulerError: a scheduler call failed (what was done before it stays done; a
            second sync finishes the rest).
    """
    declarations = checked_declarations(app)
    keys = app.settings.signing_keys
    made = {s.name: s for s in scheduler.schedules(name_prefix=SCHEDULE_PREFIX)}
    report = SyncReport()
    for declaration in declarations:
        body = schedule_fire_body(declaration.name, keys=keys)
        existing = made.pop(declaration.schedule_name, None)
        if existing is not None and (
            existing.expression,
            existing.timezone,
            existing.message_body,
        ) == (declaration.expression, declaration.timezone, body):
            report.unchanged.append(declaration.name)
        else:
            scheduler.put_recurring(
                name=declaration.schedule_name,
                expression=declaration.expression,
                message_body=body,
                timezone=declaration.timezone,
            )  # state None: a paused schedule stays paused
            (report.created if existing is None else report.updated).append(declaration.name)
        if existing is not None and existing.state.value == "DISABLED":
            report.paused.append(declaration.name)
    for name in sorted(made):
        scheduler.delete(name)
        report.deleted.append(name[len(SCHEDULE_PREFIX) :])
    return report


# -- what the schedules are doing ------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as ``continuum schedules list`` shows it.

    Attributes:
        name: the declaration's name.
        expression: its ``cron(...)`` or ``rate(...)`` (the stack's, else the declared one).
        timezone: the time zone it is read in.
        state: ENABLED, DISABLED, "not synced" (declared, not in the stack) or "not declared"
            (in the stack, no longer declared: the next sync deletes it).
        next_fire: its next time (UTC), None when it does not fire.
        last_run: its last run's task id and status, if any.
        last_skip: its last skipped fire's time and the run it waited for, if any.
        skips: how many fires were skipped, all told.
    """

    name: str
    expression: str
    timezone: str
    state: str
    next_fire: datetime | None
    last_run: str | None
    last_skip: str | None
    skips: int


def schedule_rows(
    app: DeclaresSchedules, scheduler: ContinuationScheduler, records: Records | None
) -> list[ScheduleRow]:
    """The declared schedules and continuum's schedules in the stack, by name; what each
    last did from the store when ``records`` is given."""
    made = {s.name: s for s in scheduler.schedules(name_prefix=SCHEDULE_PREFIX)}
    names = sorted({*app.registry.schedules, *(n[len(SCHEDULE_PREFIX) :] for n in made)})
    markers = records.run_markers if records else None
    now = utcnow()
    rows = []
    for name in names:
        declared = app.registry.schedules.get(name)
        stored = made.get(SCHEDULE_PREFIX + name)
        runs = markers.read(name)[0] if markers else None
        if stored is not None:
            expression, timezone = stored.expression, stored.timezone
            state = stored.state.value if declared else "not declared"
            upcoming = next_fire(stored, now) if stored.state.value == "ENABLED" else None
        else:
            assert declared is not None
            expression, timezone, state, upcoming = (
                declared.expression,
                declared.timezone,
                "not synced",
                None,
            )
        rows.append(
            ScheduleRow(
                name=name,
                expression=expression,
                timezone=timezone,
                state=state,
                next_fire=upcoming,
                last_run=_last_run(runs, records),
                last_skip=_last_skip(runs),
                skips=runs.skips if runs else 0,
            )
        )
    return rows


def next_fire(schedule: Schedule, now: datetime) -> datetime | None:
    """A recurring schedule's first time after ``now`` (None if it has none within a year)."""
    period = rate_period(schedule.expression)
    if period is not None:
        times = rate_times(period, schedule.created_at, now, now + period)
        return times[0] if times else None
    cron = parse_cron(schedule.name, schedule.expression)
    for horizon in (timedelta(days=2), timedelta(days=62), timedelta(days=400)):
        times = cron_times(cron, schedule.timezone, now, now + horizon)
        if times:
            return times[0]
    return None


def _last_run(runs: ScheduleRuns | None, records: Records | None) -> str | None:
    if runs is None or runs.run is None:
        return None
    if records is None:
        return runs.run
    try:
        status = records.load(runs.run)[0].status.value
    except RecordNotFoundError:
        status = "no record"
    return f"{runs.run} ({status})"


def _last_skip(runs: ScheduleRuns | None) -> str | None:
    if runs is None or runs.skipped is None:
        return None
    when = f"{runs.skipped.scheduled_time:%Y-%m-%dT%H:%M:%SZ}"
    return f"{when} (while {runs.skipped.running} ran)"
