"""The continuation scheduler on EventBridge Scheduler: one schedule group, the queue as target.

It only translates: schedules in, EventBridge Scheduler's answers out as the protocol's errors.
Every schedule targets the continuation queue (an SQS target: the schedule's input is the
message body) through the scheduler's role; a one-time schedule deletes itself after its fire
(``ActionAfterCompletion: DELETE``). Throttling, a 5xx and a failed connection (after
botocore's own retries) are TransientSchedulerError; a ValidationException InvalidSchedule;
anything else SchedulerError, naming the schedule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from continuum.backends.recurrence import (
    check_recurring,
)
from continuum.backends.scheduler import (
    InvalidSchedule,
    Schedule,
    ScheduleConflict,
    ScheduleNotFound,
    SchedulerError,
    ScheduleState,
    TransientSchedulerError,
    at_expression,
    check_body,
    check_name,
    check_recreate,
    check_replaceable,
    check_timezone,
)

_TRANSIENT = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "InternalServerException",
        "InternalServerError",
        "ServiceUnavailable",
        "RequestTimeout",
    }
)
#: Fires are on the minute anyway: the schedule fires at its time, never in a window after.
_NO_WINDOW = {"Mode": "OFF"}
#: EventBridge Scheduler's ClientToken: 1 to 64 characters.
_TOKEN_CHARS = 64


class SchedulerClient(Protocol):
    """The calls of boto3's ``scheduler`` client this backend makes."""

    def create_schedule(self, **kwargs: Any) -> Mapping[str, Any]: ...

    def update_schedule(self, **kwargs: Any) -> Mapping[str, Any]: ...

    def get_schedule(self, **kwargs: Any) -> Mapping[str, Any]: ...

    def delete_schedule(self, **kwargs: Any) -> Mapping[str, Any]: ...

    def list_schedules(self, **kwargs: Any) -> Mapping[str, Any]: ...


def translate(exc: ClientError | BotoCoreError, name: str | None) -> SchedulerError:
    """The protocol's error for a failed EventBridge Scheduler call about schedule ``name``."""
    if isinstance(exc, BotoCoreError):
        return TransientSchedulerError(str(exc), schedule=name)
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", "")) or str(exc)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in _TRANSIENT or status >= 500:
        return TransientSchedulerError(f"{code}: {message}", schedule=name)
    if code == "ValidationException":
        return InvalidSchedule(message, schedule=name)
    if code == "ConflictException":
        return ScheduleConflict(message, schedule=name)
    if code == "ResourceNotFoundException" and not _group_missing(exc):
        return ScheduleNotFound(message, schedule=name)
    return SchedulerError(f"{code}: {message}", schedule=name)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _group_missing(exc: ClientError) -> bool:
    """A ResourceNotFoundException about the group, not the schedule: a stack set up wrong."""
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return message.lower().startswith("schedule group")


class EventBridgeScheduler:
    """Schedules in one EventBridge Scheduler group, each sending to the continuation queue.

    Args:
        client: boto3's ``scheduler`` client.
        group: the stack's schedule group (it must exist).
        target_arn: the continuation queue's ARN.
        role_arn: the role EventBridge Scheduler assumes to send to that queue.

    Example:
        >>> scheduler = EventBridgeScheduler(
        ...     boto3.client("scheduler"), group="my-stack", target_arn=queue_arn,
        ...     role_arn=role_arn)  # doctest: +SKIP
    """

    def __init__(
        self, client: SchedulerClient, *, group: str, target_arn: str, role_arn: str
    ) -> None:
        self.client = client
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn

    def schedule_at(self, *, name: str, at: datetime, message_body: str) -> None:
        expression = at_expression(check_name(name), at)
        check_body(name, message_body)
        token = hashlib.sha256(f"{name}\n{expression}\n{message_body}".encode()).hexdigest()
        try:
            self._create(
                Name=name,
                ScheduleExpression=expression,
                ScheduleExpressionTimezone="UTC",
                ActionAfterCompletion="DELETE",
                State=ScheduleState.ENABLED.value,
                Target=self._target(message_body),
                ClientToken=token[:_TOKEN_CHARS],
            )
        except ScheduleConflict:
            existing = self.get(name)
            if existing is not None:  # gone since: it fired (and deleted itself), or was deleted
                check_recreate(existing, expression=expression, message_body=message_body)

    def put_recurring(
        self,
        *,
        name: str,
        expression: str,
        message_body: str,
        timezone: str = "UTC",
        state: ScheduleState | None = None,
    ) -> None:
        check_recurring(check_name(name), expression)
        check_body(name, message_body)
        check_timezone(name, timezone)
        fields: dict[str, Any] = {
            "Name": name,
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": timezone,
            "Target": self._target(message_body),
        }
        existing = self.get(name)
        if existing is None:
            try:
                self._create(**fields, State=(state or ScheduleState.ENABLED).value)
                return
            except ScheduleConflict as conflict:  # created meanwhile: replace it as below
                existing = self.get(name)
                if existing is None:
                    raise TransientSchedulerError(
                        "created and deleted by another caller meanwhile: try again",
                        schedule=name,
                    ) from conflict
        check_replaceable(existing)
        self._update(**fields, State=(state or existing.state).value)

    def pause(self, name: str) -> None:
        self._set_state(name, ScheduleState.DISABLED)

    def resume(self, name: str) -> None:
        self._set_state(name, ScheduleState.ENABLED)

    def get(self, name: str) -> Schedule | None:
        raw = self._read(name)
        return None if raw is None else _schedule(raw)

    def schedules(self, *, name_prefix: str = "") -> list[Schedule]:
        names: list[str] = []
        params: dict[str, Any] = {"GroupName": self.group}
        if name_prefix:
            params["NamePrefix"] = name_prefix
        while True:
            try:
                response = self.client.list_schedules(**params)
            except (ClientError, BotoCoreError) as exc:
                raise translate(exc, None) from exc
            names.extend(str(summary["Name"]) for summary in response.get("Schedules", []))
            token = response.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
        # A listing holds no expression nor input: one read each (deleted meanwhile: left out).
        found = (self.get(name) for name in sorted(set(names)))
        return [schedule for schedule in found if schedule is not None]

    def delete(self, name: str) -> None:
        try:
            self.client.delete_schedule(Name=name, GroupName=self.group)
        except ClientError as exc:
            if _code(exc) == "ResourceNotFoundException" and not _group_missing(exc):
                return
            raise translate(exc, name) from exc
        except BotoCoreError as exc:
            raise translate(exc, name) from exc

    # -- the calls ---------------------------------------------------------------------------------

    def _target(self, message_body: str) -> dict[str, Any]:
        return {"Arn": self.target_arn, "RoleArn": self.role_arn, "Input": message_body}

    def _create(self, **fields: Any) -> None:
        name = str(fields["Name"])
        try:
            self.client.create_schedule(
                GroupName=self.group, FlexibleTimeWindow=_NO_WINDOW, **fields
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, name) from exc
        except KeyError as exc:  # moto's answer for a group that does not exist
            raise self._no_group(name) from exc

    def _update(self, **fields: Any) -> None:
        name = str(fields["Name"])
        try:
            self.client.update_schedule(
                GroupName=self.group, FlexibleTimeWindow=_NO_WINDOW, **fields
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, name) from exc

    def _read(self, name: str) -> Mapping[str, Any] | None:
        try:
            return self.client.get_schedule(Name=name, GroupName=self.group)
        except ClientError as exc:
            if _code(exc) == "ResourceNotFoundException" and not _group_missing(exc):
                return None
            if _group_missing(exc):
                raise self._no_group(name) from exc
            raise translate(exc, name) from exc
        except BotoCoreError as exc:
            raise translate(exc, name) from exc

    def _set_state(self, name: str, state: ScheduleState) -> None:
        raw = self._read(name)
        if raw is None:
            raise ScheduleNotFound(f"no such schedule in the group {self.group!r}", schedule=name)
        # UpdateSchedule replaces the whole schedule: everything else is passed as it was read.
        one_time = str(raw["ScheduleExpression"]).startswith("at(")
        self._update(
            Name=name,
            ScheduleExpression=raw["ScheduleExpression"],
            ScheduleExpressionTimezone=raw.get("ScheduleExpressionTimezone") or "UTC",
            ActionAfterCompletion="DELETE" if one_time else "NONE",
            Target=raw["Target"],
            State=state.value,
        )

    def _no_group(self, name: str) -> SchedulerError:
        return SchedulerError(
            f"the schedule group {self.group!r} does not exist (create it with the stack, or "
            "give the group the stack made)",
            schedule=name,
        )


def _schedule(raw: Mapping[str, Any]) -> Schedule:
    created = _utc(raw.get("CreationDate"))
    return Schedule(
        name=str(raw["Name"]),
        expression=str(raw["ScheduleExpression"]),
        message_body=str(raw.get("Target", {}).get("Input", "")),
        timezone=str(raw.get("ScheduleExpressionTimezone") or "UTC"),
        state=ScheduleState(str(raw.get("State") or ScheduleState.ENABLED.value)),
        created_at=created,
        updated_at=_utc(raw.get("LastModificationDate"))
        if raw.get("LastModificationDate")
        else created,
    )


def _utc(value: object) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    raise SchedulerError(f"a schedule's date {value!r} is not a time")
