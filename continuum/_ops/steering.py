"""Steering tasks from outside: retry a failed task, fork one from a past checkpoint, list.

- **retry**: a failed task runs its failed turn again from its last good checkpoint, after a
  fix is deployed. The journal's recorded steps are kept (they do not run again); the step
  that failed the turn is dropped, so it runs again. The record goes ``suspended`` with
  generation + 1 by compare-and-swap, and its continuation is sent.
- **fork**: a new task starts from any stored version of a task's record (bucket versioning):
  its state, the journal of the turn in progress, its learned step durations. For debugging
  and what-if runs; the new task has its own id, inbox and history.

Both are fenced like any write (a conditional write that loses changes nothing) and both
refuse a task that is running now.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import TYPE_CHECKING, Any

from continuum._base.clock import utcnow
from continuum._ops.child_traces import retried_children_traceparents
from continuum._ops.reopening import reopen_failed
from continuum._record.continuation import Continuations
from continuum._record.history import Usage
from continuum._record.model import (
    Counters,
    EntryKind,
    JournalEntry,
    Status,
    TaskRecord,
    check_task_id,
)
from continuum._record.persistence import Records
from continuum._record.recovery import end_recovery
from continuum.errors import ContinuumError, RecordExistsError

if TYPE_CHECKING:
    from continuum._ops.status import TaskSummary


#: The suspend reason of a task a retry reopened.
RETRY = "retry"


def _reopened_by_retry(record: TaskRecord) -> bool:
    """Whether a retry reopened the task and nothing has run it since (its send may be lost)."""
    return record.status == Status.SUSPENDED and record.suspend_reason == RETRY


class Steering:
    """The steering half of the client (``client.Client`` mixes it in)."""

    records: Records
    continuations: Continuations

    def tasks(
        self,
        *,
        status: Status | str | None = None,
        task_name: str | None = None,
        since: datetime | None = None,
    ) -> list[TaskSummary]:
        """The tasks under the prefix, newest first, filtered by status, task name and the
        time they were last updated. One LIST per thousand tasks, one GET per task."""
        from continuum._ops.status import TaskSummary  # an operator's view: loaded on first use

        wanted = Status(status) if status is not None else None
        found = []
        for task_id in self.records.task_ids():
            try:
                record, _ = self.records.load(task_id)
            except ContinuumError:
                continue
            if wanted is not None and record.status != wanted:
                continue
            if task_name is not None and record.task_name != task_name:
                continue
            if since is not None and record.updated_at < since:
                continue
            found.append(
                TaskSummary(
                    task_id=record.task_id,
                    task_name=record.task_name,
                    status=record.status,
                    turn=record.turn,
                    invocations=record.counters.invocations,
                    created_at=record.created_at,
                    updated_at=record.updated_at,
                    parent=record.parent.task_id if record.parent else None,
                    index=record.parent.index if record.parent else 0,
                )
            )
        return sorted(found, key=lambda t: t.updated_at, reverse=True)

    def retry(self, task_id: str) -> int:
        """Run a failed task's failed turn again; return its new generation. A task that a
        retry reopened and nothing has run since gets its continuation again: a retry cut
        short between its write and its send is finished by the next.

        Raises:
            ContinuumError: the task is not ``failed`` (a running one is refused).
            RecordConflictError: the record moved meanwhile (nothing was written).
        """
        return self._retry(task_id, traceparent=None)

    def _retry(self, task_id: str, *, traceparent: str | None) -> int:
        """``retry``; ``traceparent``: the span the new run hangs under (a child's, when its
        parent's retry retries it: the wait of the parent's new run)."""
        record, revision = self.records.load(check_task_id(task_id))
        if _reopened_by_retry(record):
            # A retry already reopened it (its failed children first), and may have died
            # before its send: send it again (the fence makes a duplicate harmless).
            self.continuations.send(task_id, generation=record.generation, reason=RETRY)
            return record.generation
        if record.status != Status.FAILED:
            raise ContinuumError(
                f"retry takes a failed task; this one is {record.status.value}",
                task_id=task_id,
                hint="`continuum resume` sends a suspended or waiting task's continuation",
            )
        # The error names the step by its path from the task; its journal entry by its key.
        failed = (
            record.error.step.rpartition("/")[2] if record.error and record.error.step else None
        )
        singles = {batch.prefix for batch in record.children if batch.single}
        children = reopen_failed(record.journal, failed, singles, record.error)
        # Its failed children first: the parent, running again, then waits for their ends.
        self._retry_children(
            task_id, children, retried_children_traceparents(record, self.records.stack, children)
        )
        record.status = Status.SUSPENDED
        record.generation += 1
        record.error = None
        record.finished_at = None
        record.lease = None
        record.suspended_by = None
        record.suspend_reason = RETRY
        record.idle_suspensions = 0
        record.counters.retries += 1
        if traceparent is not None:
            record.traceparent = traceparent
        end_recovery(record)
        self.records.swap(record, revision=revision)
        self.records.revive(task_id, record.blob_refs())
        self.continuations.send(task_id, generation=record.generation, reason=RETRY)
        return record.generation

    def _retry_children(
        self, task_id: str, children: list[str], traceparents: dict[str, str]
    ) -> None:
        """Retry those of a retried parent's failed children that are its own and failed, or
        that an earlier retry reopened (its send may have been lost), each under the span
        ``traceparents`` names for it."""
        for child in children:
            try:
                record, _ = self.records.load(child)
            except ContinuumError:
                continue
            if record.parent is None or record.parent.task_id != task_id:
                continue  # a slot another task held: not this parent's child
            if record.status == Status.FAILED or _reopened_by_retry(record):
                self._retry(child, traceparent=traceparents.get(child))

    def fork(self, task_id: str, *, version: str, new_id: str) -> str:
        """Start ``new_id`` from version ``version`` of ``task_id``'s record; return new_id.

        ``version`` is a version id (``continuum inspect`` lists them), or ``latest``.

        Raises:
            ContinuumError: the task is running now, or ``new_id`` is taken.
            RecordNotFoundError: no such task or version.
        """
        check_task_id(new_id)
        current, _ = self.records.load(check_task_id(task_id))
        lease = current.lease
        if current.status == Status.RUNNING and lease is not None and lease.expires_at > utcnow():
            raise ContinuumError(
                "fork refuses a task that is running now", task_id=task_id, hint="try again later"
            )
        source = current if version == "latest" else self.records.load_version(task_id, version)
        fork = _forked(source, new_id)
        try:
            self.records.create(fork)
        except RecordExistsError:
            raise ContinuumError(
                f"task id {new_id!r} is taken", task_id=new_id, hint="choose another --as"
            ) from None
        self.continuations.send(new_id, generation=0, reason=f"fork of {task_id}")
        return new_id


def _forked(source: TaskRecord, new_id: str) -> TaskRecord:
    """A new task's record from a checkpoint: its state and turn in progress, nothing else."""
    kept: dict[str, Any] = {
        "task_name": source.task_name,
        "state": source.state,
        "state_version": source.state_version,
        "turn": source.turn,
        "journal": _own_children(source.journal),
        "step_stats": source.step_stats,
        "save_stats": source.save_stats,
        "send_stats": source.send_stats,
        "callbacks": source.callbacks,
    }
    record = TaskRecord(task_id=new_id, **kept)
    record.counters, record.usage = Counters(), Usage()
    record.forked_from = source.task_id
    return record


def _own_children(entries: list[JournalEntry]) -> list[JournalEntry]:
    """A journal for a fork: a call of child tasks that had not finished is dropped, so that
    the fork starts children of its own (the original's report to the original); a finished
    one keeps its result, as a step does. An ``at_most_once`` step's started-marker is dropped
    at any depth (a child context's, as an async task's tool calls have), so that the fork runs
    the step rather than failing it as interrupted."""
    kept = []
    for entry in entries:
        if entry.started or (entry.kind == EntryKind.CHILDREN and entry.partial):
            continue
        if entry.children is not None:
            inner = _own_children(entry.children)
            entry = copy.copy(entry)
            entry.children = inner
        kept.append(entry)
    return kept
