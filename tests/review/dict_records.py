"""A ``Records`` written from ``persistence.Records``' docstring alone, on dicts (review of
issue 35): what another store would write to stand under the record-level seam; its run
markers written from ``schedule_runs.RunMarkers``' docstring alone."""

from __future__ import annotations

import itertools
import threading
from datetime import datetime
from typing import Any

from continuum._base.clock import utcnow
from continuum._record.inbox import Inbox
from continuum._record.model import BlobRef, TaskRecord
from continuum._record.persistence import PastRecord
from continuum._record.schedule_runs import FireDecision, ScheduleRuns
from continuum.errors import (
    BlobMissingError,
    RecordConflictError,
    RecordExistsError,
    RecordNotFoundError,
)


class DictRunMarkers:
    """Run markers in dicts, one lock: revisions are a counter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = itertools.count(1)
        self._runs: dict[str, tuple[str, str]] = {}  # schedule: (revision, JSON)
        self._decisions: dict[tuple[str, datetime], str] = {}

    def read(self, schedule: str) -> tuple[ScheduleRuns | None, str | None]:
        with self._lock:
            if schedule not in self._runs:
                return None, None
            revision, body = self._runs[schedule]
        return ScheduleRuns.model_validate_json(body), revision

    def write(self, runs: ScheduleRuns, *, revision: str | None) -> str:
        body = runs.model_dump_json()
        with self._lock:
            current = self._runs.get(runs.schedule)
            if (current[0] if current else None) != revision:
                raise RecordConflictError(f"schedule {runs.schedule!r} moved")
            new = str(next(self._count))
            self._runs[runs.schedule] = (new, body)
            return new

    def decision(self, schedule: str, scheduled_time: datetime) -> FireDecision | None:
        body = self._decisions.get((schedule, scheduled_time))
        return None if body is None else FireDecision.model_validate_json(body)

    def decide(self, schedule: str, decision: FireDecision) -> tuple[FireDecision, bool]:
        with self._lock:
            made = self._decisions.setdefault(
                (schedule, decision.scheduled_time), decision.model_dump_json()
            )
        ours = FireDecision.model_validate_json(made)
        return ours, ours == decision


class DictRecords:
    """Records in dicts, one lock: revisions are a counter, history a list per task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = itertools.count(1)
        self._records: dict[str, tuple[str, str]] = {}  # task id: (revision, JSON)
        self._history: dict[str, list[tuple[str, datetime, str]]] = {}
        self._swept: set[str] = set()
        self._inbox: dict[tuple[str, str], bytes] = {}
        self.run_markers = DictRunMarkers()

    stack = "dict-records"
    max_value_bytes = None
    last_record_bytes = 0

    @property
    def inbox(self) -> Inbox:
        return Inbox(self, stack=self.stack)

    def _write(self, record: TaskRecord) -> str:
        revision = str(next(self._count))
        body = record.model_dump_json()
        self._records[record.task_id] = (revision, body)
        self._history.setdefault(record.task_id, []).append((revision, utcnow(), body))
        return revision

    def load(self, task_id: str) -> tuple[TaskRecord, str]:
        with self._lock:
            if task_id not in self._records:
                raise RecordNotFoundError("no record", task_id=task_id)
            revision, body = self._records[task_id]
        return TaskRecord.model_validate_json(body), revision

    def create(self, record: TaskRecord) -> str:
        with self._lock:
            if record.task_id in self._records:
                raise RecordExistsError("task id taken", task_id=record.task_id)
            return self._write(record)

    def swap(
        self,
        record: TaskRecord,
        *,
        revision: str,
        finished: bool = False,
        lease_until: datetime | None = None,
    ) -> str:
        with self._lock:
            current = self._records.get(record.task_id)
            if current is None or current[0] != revision:
                raise RecordConflictError("moved", task_id=record.task_id)
            record.updated_at = utcnow()
            new = self._write(record)
            if finished:
                self._swept.add(record.task_id)
            return new

    def task_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._records)

    def history(self, task_id: str, *, most: int) -> list[PastRecord]:
        with self._lock:
            writes = self._history.get(task_id, [])[-most:]
        past = []
        for version, at, body in writes:
            record = TaskRecord.model_validate_json(body)
            past.append(PastRecord(version, at, record, record.state, False))
        return past

    def load_version(self, task_id: str, version: str) -> TaskRecord:
        for past, _, body in self._history.get(task_id, []):
            if past == version:
                return TaskRecord.model_validate_json(body)
        raise RecordNotFoundError(f"no version {version}", task_id=task_id)

    def large_value(self, task_id: str, digest: str) -> Any:
        raise BlobMissingError("values are kept inline", task_id=task_id)

    def ensure_swept(self, record: TaskRecord) -> bool:
        with self._lock:
            if record.task_id in self._swept:
                return False
            self._swept.add(record.task_id)
            return True

    def revive(self, task_id: str, used: list[BlobRef]) -> None:
        with self._lock:
            self._swept.discard(task_id)

    def inbox_put(self, task_id: str, name: str, body: bytes, *, create: bool) -> bool:
        with self._lock:
            if create and (task_id, name) in self._inbox:
                return False
            self._inbox[task_id, name] = body
            return True

    def inbox_get(self, task_id: str, name: str) -> bytes | None:
        return self._inbox.get((task_id, name))

    def inbox_list(self, task_id: str) -> list[str]:
        with self._lock:
            return sorted(name for tid, name in self._inbox if tid == task_id)

    def inbox_delete(self, task_id: str, name: str) -> None:
        with self._lock:
            self._inbox.pop((task_id, name), None)
