"""What a recurring schedule's fires did: its last run and its last skip, beside the records.

One small object per schedule, ``{prefix}/_schedules/{name}.json`` (no task id starts with
``_``), written only by a conditional put: a fire that would start a run writes it first, so
that of two concurrent fires one wins and the other, reading again, finds the winner's run.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError

from continuum._record.unknown_fields import KeepsUnknownFields
from continuum.backends.store import NoSuchKey, RecordStore, put_with_retries

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


class RunMarkers:
    """The schedules' objects under one prefix of a store."""

    def __init__(self, store: RecordStore, *, prefix: str) -> None:
        self.store = store
        self.prefix = prefix.strip("/")

    def key(self, schedule: str) -> str:
        return f"{self.prefix}/{RUNS_FOLDER}/{schedule}.json"

    def read(self, schedule: str) -> tuple[ScheduleRuns | None, str | None]:
        """The schedule's object and its etag; (None, None) before its first run.

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

    def write(self, runs: ScheduleRuns, *, etag: str | None) -> str:
        """Replace the object read with ``etag`` (None: create it). Raises PreconditionFailed."""
        body = runs.model_dump_json(exclude_none=True).encode()
        return put_with_retries(
            self.store,
            self.key(runs.schedule),
            body,
            if_match=etag,
            if_none_match=etag is None,
        )
