"""What a recurring schedule's fires did: its last run and skip, and each time's decision.

:class:`RunMarkers` is what the schedules' fires ask of storage, beside the task records
(``Records.run_markers`` hands it out); :class:`BlobRunMarkers` keeps it on a blob store.

On a blob store: one small object per schedule, ``{prefix}/_schedules/{name}.json`` (no task id
starts with ``_``), written only by a conditional put: a fire that would start a run writes it
first, so that of two concurrent fires one wins and the other, reading again, finds the
winner's run.

Beside it, for a schedule with ``overlap="skip"``, one object per scheduled time,
``{prefix}/_schedules/{name}/{yyyymmddThhmmssZ}.json``, created once (``If-None-Match``): the
fire's decision, started or skipped. Every later delivery of that time's fire reads it and
follows it, so that a skipped time stays skipped whatever was skipped after it. A decision is
needed only while its fire can be delivered again, so it is created tagged as a finished task's
objects are, and the bucket's lifecycle rule expires it with them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, Protocol

from pydantic import ValidationError

from continuum._record.blobs import FINISHED_TAGS
from continuum._record.unknown_fields import KeepsUnknownFields
from continuum.backends.store import NoSuchKey, PreconditionFailed, RecordStore, put_with_retries
from continuum.errors import RecordConflictError

#: The folder under the records' prefix that holds the schedules' objects.
RUNS_FOLDER = "_schedules"


class SkippedFire(KeepsUnknownFields):
    """A fire that started nothing: the previous run had not finished (``overlap="skip"``)."""

    scheduled_time: datetime
    #: the run that had not finished.
    running: str
    #: when the fire was skipped.
    at: datetime


class ScheduleRuns(KeepsUnknownFields):
    """A schedule's last run (the task its latest fire started) and its last skip."""

    schedule: str
    run: str | None = None
    scheduled_time: datetime | None = None
    started_at: datetime | None = None
    skipped: SkippedFire | None = None
    #: how many fires were skipped, all told.
    skips: int = 0


class FireDecision(KeepsUnknownFields):
    """What the first delivery of one scheduled time's fire decided, for every later one."""

    scheduled_time: datetime
    outcome: Literal["started", "skipped"]
    #: when skipped: the run that had not finished.
    running: str | None = None
    #: when it was decided.
    at: datetime


class RunMarkers(Protocol):
    """What each recurring schedule's fires did: one :class:`ScheduleRuns` per schedule,
    written by compare-and-swap, and one :class:`FireDecision` per scheduled time, created once.

    Safe to call from several threads and processes at once; the atomicity is the store's.

    - :meth:`read` answers the schedule's runs and their *revision* (an opaque string that
      changes with every write), or ``(None, None)`` before the first write; runs that do not
      parse are ``(None, revision)``, so that the next write replaces them.
    - :meth:`write` with ``revision=None`` creates the runs only if the schedule has none;
      with a revision, it replaces them only if they still have it. Otherwise it raises
      :class:`~continuum.errors.RecordConflictError` and writes nothing. A write retried after
      its reply was lost counts as landed (the same runs read back are ours).
    - :meth:`decide` makes a decision the scheduled time's only if it has none, atomically (of
      two decides of one time exactly one is made); it answers the decision made and whether it
      is the one given (an equal decision, retried after a lost reply, is). :meth:`decision`
      reads it again, None before one was made (or if it does not parse).
    - A decision is needed only while its fire can be delivered again: it may expire with a
      finished task's objects; the runs stay.
    """

    def read(self, schedule: str) -> tuple[ScheduleRuns | None, str | None]:
        """The schedule's runs and their revision; (None, None) before its first run."""
        ...

    def write(self, runs: ScheduleRuns, *, revision: str | None) -> str:
        """Replace the runs read at ``revision`` (None: create them); return the new revision.

        Raises:
            RecordConflictError: another fire wrote them first; nothing was written.
        """
        ...

    def decision(self, schedule: str, scheduled_time: datetime) -> FireDecision | None:
        """The decision of the fire for ``scheduled_time``, if one was made (and parses)."""
        ...

    def decide(self, schedule: str, decision: FireDecision) -> tuple[FireDecision, bool]:
        """Make ``decision`` the fire's, unless another delivery made one first; return the
        fire's decision, and whether it is this one."""
        ...


class BlobRunMarkers:
    """:class:`RunMarkers` as objects under one prefix of a blob store (the module's layout)."""

    def __init__(self, store: RecordStore, *, prefix: str) -> None:
        self.store = store
        self.prefix = prefix.strip("/")

    def key(self, schedule: str) -> str:
        return f"{self.prefix}/{RUNS_FOLDER}/{schedule}.json"

    def fire_key(self, schedule: str, scheduled_time: datetime) -> str:
        """The key of the decision of ``schedule``'s fire for ``scheduled_time``."""
        when = scheduled_time.astimezone(UTC)
        return f"{self.prefix}/{RUNS_FOLDER}/{schedule}/{when:%Y%m%dT%H%M%SZ}.json"

    def read(self, schedule: str) -> tuple[ScheduleRuns | None, str | None]:
        """The schedule's object and its revision (its etag); (None, None) before its first run.

        An object that does not parse is treated as absent (and replaced by the next run).
        """
        try:
            stored = self.store.get(self.key(schedule))
        except NoSuchKey:
            return None, None
        try:
            return ScheduleRuns.model_validate_json(stored.body), stored.etag
        except ValidationError:
            return None, stored.etag

    def write(self, runs: ScheduleRuns, *, revision: str | None) -> str:
        """Replace the object read at ``revision`` (None: create it); return the new etag.
        Raises RecordConflictError."""
        key = self.key(runs.schedule)
        body = runs.model_dump_json(exclude_none=True).encode()
        try:
            return put_with_retries(
                self.store, key, body, if_match=revision, if_none_match=revision is None
            )
        except (PreconditionFailed, NoSuchKey):  # S3 answers 404 to If-Match on a gone key
            try:
                stored = self.store.get(key)
            except NoSuchKey:
                stored = None
            if stored is not None and stored.body == body:
                return stored.etag  # a retried put whose first attempt landed
            raise RecordConflictError(
                f"schedule {runs.schedule!r}: its runs were written by another fire"
            ) from None

    def decision(self, schedule: str, scheduled_time: datetime) -> FireDecision | None:
        """The decision of the fire for ``scheduled_time``, if one was made (and parses)."""
        try:
            stored = self.store.get(self.fire_key(schedule, scheduled_time))
        except NoSuchKey:
            return None
        try:
            return FireDecision.model_validate_json(stored.body)
        except ValidationError:
            return None

    def decide(self, schedule: str, decision: FireDecision) -> tuple[FireDecision, bool]:
        """Make ``decision`` the fire's, unless another delivery made one first.

        Returns the fire's decision, and whether it is this one.
        """
        key = self.fire_key(schedule, decision.scheduled_time)
        body = decision.model_dump_json(exclude_none=True).encode()
        try:
            put_with_retries(self.store, key, body, if_none_match=True, tags=FINISHED_TAGS)
        except PreconditionFailed:
            made = self.decision(schedule, decision.scheduled_time)
            if made is None:
                raise
            return made, made == decision  # equal: this put, landed before a retry
        return decision, True
