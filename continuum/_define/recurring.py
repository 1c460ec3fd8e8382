"""Recurring schedules an app declares: ``app.schedule(name, task, cron=... or every=...)``.

A declaration says which task a schedule starts, with what input, when (an EventBridge
Scheduler expression, checked here), in which time zone, and what a fire does while the
schedule's previous run has not finished (``overlap``). The stack's schedule of a declaration
is named :data:`SCHEDULE_PREFIX` + its name: no wait's one-time schedule starts so (a wait's
starts with its task id, a letter or digit), which is how a sync tells them apart. Each fire
starts one task whose id is the schedule's name and the scheduled time (:func:`run_task_id`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from continuum._base.json_values import model_to_json
from continuum.backends.recurrence import recurring_expression
from continuum.backends.scheduler import SchedulerError, check_timezone
from continuum.errors import ConfigurationError, describe_errors

Overlap = Literal["skip", "allow"]
#: What every schedule continuum makes for a declaration is named after.
SCHEDULE_PREFIX = "_schedule."
#: A schedule's name: it prefixes its runs' task ids, and its EventBridge name is
#: SCHEDULE_PREFIX + it (64 characters at most).
_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.-]{0,53}$")
#: How a run's task id writes its scheduled time.
RUN_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True, slots=True)
class ScheduleDeclaration:
    """A recurring schedule of the app.

    Attributes:
        name: the schedule's name (its runs are ``{name}-{yyyymmddThhmmssZ}``).
        task_name: the task each fire starts.
        expression: ``cron(...)`` or ``rate(...)``, as EventBridge Scheduler takes it.
        input: the started task's input (JSON), the state model's defaults when None.
        timezone: the IANA time zone the expression is read in.
        overlap: "skip" (a fire while the previous run has not finished starts nothing) or
            "allow" (every fire starts a run).
    """

    name: str
    task_name: str
    expression: str
    input: Any
    timezone: str
    overlap: Overlap

    @property
    def schedule_name(self) -> str:
        """Its schedule's name in the stack's group."""
        return SCHEDULE_PREFIX + self.name

    @property
    def start_input(self) -> Any:
        """What a run starts with: the input, or ``{}`` (the state model's defaults)."""
        return {} if self.input is None else self.input


def declare_schedule(
    name: str,
    task_name: str,
    *,
    cron: str | None,
    every: timedelta | None,
    input: Any,
    timezone: str,
    overlap: str,
) -> ScheduleDeclaration:
    """A checked declaration. Raises ConfigurationError naming the schedule and what is wrong."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"schedule {name!r}: a schedule's name is 1 to 54 letters, digits, '.', '_' or "
            "'-', starting with a letter or digit (it starts its runs' task ids)"
        )
    if overlap not in ("skip", "allow"):
        raise ConfigurationError(
            f"schedule {name!r}: overlap={overlap!r}; give 'skip' (a fire while the previous "
            "run has not finished starts nothing) or 'allow'"
        )
    if every is not None and not isinstance(every, timedelta):
        raise ConfigurationError(
            f"schedule {name!r}: every= is a timedelta (e.g. timedelta(hours=1)), got "
            f"{type(every).__name__}"
        )
    try:
        expression = recurring_expression(name, cron=cron, every=every)
        check_timezone(name, timezone)
    except SchedulerError as exc:
        raise ConfigurationError(str(exc)) from None
    return ScheduleDeclaration(
        name=name,
        task_name=task_name,
        expression=expression,
        input=input,
        timezone=timezone,
        overlap="skip" if overlap == "skip" else "allow",
    )


def check_input(declaration: ScheduleDeclaration, state_model: type[BaseModel]) -> Any:
    """The declaration's start input as JSON, validated against the task's state model.

    Raises ConfigurationError naming the schedule, its task and what does not validate.
    """
    given = declaration.start_input
    try:
        model = given if isinstance(given, state_model) else state_model.model_validate(given)
    except ValidationError as exc:
        raise ConfigurationError(
            f"schedule {declaration.name!r}: its input for task {declaration.task_name!r} does "
            f"not validate against {state_model.__name__}: {describe_errors(exc)}",
            hint="give input= a value of the task's state model (None: its defaults)",
        ) from None
    return model_to_json(model, what=f"the input of schedule {declaration.name!r}")


def run_task_id(name: str, scheduled_time: datetime) -> str:
    """The task id of a schedule's run for one scheduled time: the same at every fire of it.

    Example:
        >>> run_task_id("nightly", datetime(2027, 1, 15, 2, 0, tzinfo=UTC))
        'nightly-20270115T020000Z'
    """
    return f"{name}-{scheduled_time.astimezone(UTC).strftime(RUN_TIME_FORMAT)}"
