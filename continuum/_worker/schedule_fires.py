"""A recurring schedule's fire: start its run for the scheduled time, once, unless it overlaps.

1. The fire is verified like a continuation (signed by the app's key, its scheduled time left
   out of what is signed) and names a schedule the app declares; else it is acknowledged with
   a log line (retrying cannot fix it), never retried forever.
2. The run's task id is the schedule's name and the scheduled time (``run_task_id``): a fire
   delivered twice, or late, finds its record and starts nothing new.
3. With ``overlap="skip"``, the schedule's object (``_record/schedule_runs.py``) names its last
   run; a fire while that run has not finished starts nothing, logs it, counts it as the
   ``schedule-skipped`` outcome and notes it in the object (``continuum schedules list``).
   The first delivery of a scheduled time records its decision, started or skipped, in an
   object of that time created once; every later delivery follows it, so that a skipped time
   stays skipped even once the previous run has finished. A fire that would start writes the
   schedule's object first, conditionally: of two concurrent fires one wins the write, and
   the other reads the winner's run and skips.
4. Else the run starts as ``client.start`` starts a task: a pending record, then its
   continuation.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError

from continuum._base.clock import utcnow
from continuum._base.json_values import dump_json, model_to_json
from continuum._define.recurring import ScheduleDeclaration, run_task_id
from continuum._define.settings import Settings
from continuum._record.continuation import Continuations, decode_schedule_fire
from continuum._record.model import Status, TaskRecord
from continuum._record.persistence import Records
from continuum._record.schedule_runs import FireDecision, ScheduleRuns, SkippedFire
from continuum._turn.tasks import Registry, Task
from continuum._worker.endings import Outcome
from continuum._worker.sqs_batch import Delivery, logger
from continuum.errors import (
    BadMessageError,
    ContinuumError,
    InvalidInputError,
    PayloadTooLargeError,
    RecordConflictError,
    RecordExistsError,
    RecordNotFoundError,
    UnknownTaskError,
    describe_errors,
)

#: A run named by the schedule's object but without a record yet counts as running this long
#: (its fire may be between the object's write and the record's create, or retried after).
START_GRACE = timedelta(minutes=15)
#: A fire scheduled further ahead than this is refused: no scheduler fires early.
FUTURE_SLACK = timedelta(minutes=5)
#: How often a fire reads the schedule's object again after losing its conditional write.
OBJECT_RETRIES = 5

FireKind = Literal["started", "duplicate", "skipped"]


@dataclass(frozen=True, slots=True)
class FireResult:
    """What a fire did: started its run, found it started (a duplicate), or skipped.

    Attributes:
        kind: "started", "duplicate" or "skipped".
        task_id: the run's task id (not started when skipped).
        running: when skipped, the previous run that had not finished.
    """

    kind: FireKind
    task_id: str
    running: str | None = None


class ScheduleFires:
    """Starts the runs of one app's recurring schedules, a fire at a time."""

    def __init__(
        self,
        registry: Registry,
        records: Records,
        continuations: Continuations,
        settings: Settings,
    ) -> None:
        self.registry = registry
        self.records = records
        self.continuations = continuations
        self.settings = settings
        self.markers = records.run_markers

    def handle(self, delivery: Delivery) -> Outcome:
        """A fire from the queue: what it did, or REJECTED (acknowledged) if it cannot start."""
        extra: dict[str, Any] = {"message_id": delivery.message_id}
        try:
            fire = decode_schedule_fire(delivery.body, keys=self.continuations.keys)
        except BadMessageError as exc:
            logger.error(f"rejected a schedule's fire: {exc}", extra=extra)
            return Outcome.REJECTED
        extra["schedule"] = fire.schedule
        declaration = self.registry.schedules.get(fire.schedule)
        if declaration is None:
            known = ", ".join(sorted(self.registry.schedules)) or "none"
            logger.error(
                f"schedule {fire.schedule!r} fired, but this app no longer declares it "
                f"(it declares: {known}); acknowledged. `continuum schedules sync` deletes "
                "the schedules the app no longer declares",
                extra=extra,
            )
            return Outcome.REJECTED
        try:
            scheduled_time = datetime.strptime(fire.at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            logger.error(
                f"schedule {fire.schedule!r} fired with the scheduled time {fire.at!r}, which is "
                "not one (EventBridge Scheduler writes 2027-01-15T08:00:00Z); acknowledged",
                extra=extra,
            )
            return Outcome.REJECTED
        if scheduled_time > utcnow() + FUTURE_SLACK:
            logger.error(
                f"schedule {fire.schedule!r} fired for {fire.at}, which has not come: no "
                "scheduler fires early, so the body was sent by hand; acknowledged",
                extra=extra,
            )
            return Outcome.REJECTED
        try:
            result = self.fire(declaration, scheduled_time)
        except (UnknownTaskError, InvalidInputError, PayloadTooLargeError) as exc:
            logger.error(
                f"schedule {fire.schedule!r} cannot start its run: {exc}; acknowledged (fix the "
                "declaration, deploy, and sync the schedules)",
                extra=extra,
            )
            return Outcome.REJECTED
        return {
            "started": Outcome.STARTED,
            "duplicate": Outcome.DUPLICATE,
            "skipped": Outcome.SKIPPED,
        }[result.kind]

    def fire(self, declaration: ScheduleDeclaration, scheduled_time: datetime) -> FireResult:
        """Start the schedule's run for ``scheduled_time``, once; or skip it (overlap).

        Raises:
            UnknownTaskError: the app has no such task.
            InvalidInputError: the declared input does not validate against its state model.
            PayloadTooLargeError: the input is over the app's ``max_state_bytes``.
        """
        name = declaration.name
        task_id = run_task_id(name, scheduled_time)
        task = self.registry.task(declaration.task_name, task_id=task_id)
        state = self._state(declaration, task, task_id)
        existing = self._load(task_id)
        if existing is not None:
            if existing.task_name != task.name:
                raise InvalidInputError(
                    f"task id is already used by task {existing.task_name!r}", task_id=task_id
                )
            if existing.status == Status.PENDING:  # its first send may have been lost
                self.continuations.send(task_id, generation=0, reason="start")
            logger.info(
                f"schedule {name!r}: its run for {scheduled_time:%Y-%m-%dT%H:%M:%SZ} was "
                "started before; nothing new",
                extra={"schedule": name, "task_id": task_id},
            )
            return FireResult("duplicate", task_id)
        if declaration.overlap == "skip":
            return self._fire_unless_overlapping(task, task_id, state, name, scheduled_time)
        for _ in range(OBJECT_RETRIES):
            runs, revision = self.markers.read(name)
            previous = runs or ScheduleRuns(schedule=name)
            if previous.scheduled_time is not None and previous.scheduled_time > scheduled_time:
                break  # a late fire: the object keeps naming the latest run
            started = previous.model_copy(
                update={"run": task_id, "scheduled_time": scheduled_time, "started_at": utcnow()}
            )
            try:
                self.markers.write(started, revision=revision)
                break
            except RecordConflictError:
                continue  # another fire wrote it first: read it again
        return self._started(task, task_id, state, name)

    def _fire_unless_overlapping(
        self, task: Task[Any], task_id: str, state: Any, name: str, scheduled_time: datetime
    ) -> FireResult:
        """``overlap="skip"``: the first delivery of this time decides, every later one follows.

        A fire that would start names its run in the schedule's object first (of two fires of
        different times, one wins), then records the decision; a fire that would skip records
        the decision, then notes the skip. A worker killed between the writes leaves either
        nothing decided (the next delivery decides) or a decision the next delivery follows.
        """
        decided = self.markers.decision(name, scheduled_time)
        if decided is not None:
            return self._follow(decided, task, task_id, state, name)
        for _ in range(OBJECT_RETRIES):
            runs, revision = self.markers.read(name)
            if runs is not None and runs.skipped and runs.skipped.scheduled_time == scheduled_time:
                return FireResult("skipped", task_id, running=runs.skipped.running)  # again
            running = self._running(runs, task_id)
            if running is not None:
                skip = FireDecision(
                    scheduled_time=scheduled_time, outcome="skipped", running=running, at=utcnow()
                )
                decided, ours = self.markers.decide(name, skip)
                if ours:
                    self._note_skip(name, scheduled_time, running)
                return self._follow(decided, task, task_id, state, name)
            previous = runs or ScheduleRuns(schedule=name)
            started = previous.model_copy(
                update={"run": task_id, "scheduled_time": scheduled_time, "started_at": utcnow()}
            )
            try:
                self.markers.write(started, revision=revision)
            except RecordConflictError:
                continue  # another fire wrote it first: read what it started
            start = FireDecision(scheduled_time=scheduled_time, outcome="started", at=utcnow())
            decided, _ = self.markers.decide(name, start)
            return self._follow(decided, task, task_id, state, name)
        # Only another fire moves the object; the next delivery of this one decides.
        raise ContinuumError(
            f"schedule {name!r}: its object kept changing under this fire; it is retried",
            task_id=task_id,
        )

    def _follow(
        self, decided: FireDecision, task: Task[Any], task_id: str, state: Any, name: str
    ) -> FireResult:
        """Carry out the time's decision: skipped stays skipped; started starts its run once."""
        if decided.outcome == "skipped":
            return FireResult("skipped", task_id, running=decided.running)
        return self._started(task, task_id, state, name)

    def _started(self, task: Task[Any], task_id: str, state: Any, name: str) -> FireResult:
        if not self._start(task, task_id, state):
            return FireResult("duplicate", task_id)
        logger.info(
            f"schedule {name!r} started {task_id}",
            extra={"schedule": name, "task_id": task_id},
        )
        return FireResult("started", task_id)

    # -- the previous run ------------------------------------------------------------------

    def _running(self, runs: ScheduleRuns | None, task_id: str) -> str | None:
        """The schedule's last run if it has not finished (not this fire's own run)."""
        if runs is None or runs.run is None or runs.run == task_id:
            return None
        record = self._load(runs.run)
        if record is None:
            if runs.scheduled_time is not None:
                decided = self.markers.decision(runs.schedule, runs.scheduled_time)
                if decided is not None and decided.outcome == "skipped":
                    return None  # named by a fire that then found its time skipped
            started = runs.started_at or datetime.min.replace(tzinfo=UTC)
            return runs.run if utcnow() - started < START_GRACE else None
        return None if record.status.finished else runs.run

    def _note_skip(self, name: str, scheduled_time: datetime, running: str) -> None:
        """Say that a fire was skipped: in the log, and (best effort) in the schedule's object."""
        when = f"{scheduled_time:%Y-%m-%dT%H:%M:%SZ}"
        logger.warning(
            f"schedule {name!r} skipped its fire for {when}: its previous run "
            f"{running} has not finished (overlap='skip')",
            extra={"schedule": name, "task_id": running, "scheduled_time": when},
        )
        skipped = SkippedFire(scheduled_time=scheduled_time, running=running, at=utcnow())
        for _ in range(OBJECT_RETRIES):  # the decision is made: only the count is at stake
            runs, revision = self.markers.read(name)
            runs = runs or ScheduleRuns(schedule=name)
            noted = runs.model_copy(update={"skipped": skipped, "skips": runs.skips + 1})
            with contextlib.suppress(RecordConflictError):
                self.markers.write(noted, revision=revision)
                return

    # -- the run ---------------------------------------------------------------------------

    def _load(self, task_id: str) -> TaskRecord | None:
        try:
            return self.records.load(task_id)[0]
        except RecordNotFoundError:
            return None

    def _state(self, declaration: ScheduleDeclaration, task: Task[Any], task_id: str) -> Any:
        try:
            model = task.state_model.model_validate(declaration.start_input)
        except ValidationError as exc:
            raise InvalidInputError(
                f"the input of schedule {declaration.name!r} does not validate against task "
                f"{task.name!r}'s {task.state_model.__name__}: {describe_errors(exc)}",
                task_id=task_id,
            ) from None
        state = model_to_json(model, what=f"the input of schedule {declaration.name!r}")
        size = len(dump_json(state))
        if size > self.settings.max_state_bytes:
            raise PayloadTooLargeError(
                f"input state is {size} bytes; the limit is {self.settings.max_state_bytes}",
                task_id=task_id,
            )
        return state

    def _start(self, task: Task[Any], task_id: str, state: Any) -> bool:
        """Create the run's record (pending) and send its first continuation; a run whose
        record exists is sent again only while it is pending (its first send may be lost).
        Whether this call created the record."""
        record = TaskRecord(
            task_id=task_id,
            task_name=task.name,
            state=state,
            state_version=task.version,
            max_value_bytes=self.settings.max_state_bytes,
        )
        try:
            self.records.create(record)
        except RecordExistsError:
            existing = self._load(task_id)
            if existing is not None and existing.status == Status.PENDING:
                self.continuations.send(task_id, generation=0, reason="start")
            return False
        self.continuations.send(task_id, generation=0, reason="start")
        return True
