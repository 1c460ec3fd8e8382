"""What a task did, from its record and the record's earlier versions: ``continuum inspect``.

The record holds the latest invocations (``record.history``) with their steps; each earlier
version of the record (bucket versioning) holds the history as it was then, and the state and
journal at that checkpoint. A :class:`TaskView` merges them: every invocation the versions
still show (by number, the most complete copy), each checkpoint, what the task waits for,
its error, its state and what it cost. Reading costs GETs only; nothing is written.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from continuum._base.callback_links import CallbackLinks
from continuum._ops.agent_view import AgentEvent, agent_events
from continuum._ops.prices import dollars
from continuum._ops.status import WaitingFor, shown_waiter, unstarted_hint
from continuum._record.history import InvocationRun, RunOutcome, Usage
from continuum._record.model import (
    Counters,
    ErrorInfo,
    JournalEntry,
    Status,
    TaskRecord,
    check_task_id,
)
from continuum._record.persistence import Records
from continuum._worker.wake import waiting_for
from continuum.errors import RecordNotFoundError

#: Earlier record versions read by default (one GET each): enough for a task's recent past.
DEFAULT_VERSIONS = 200


class Checkpoint(BaseModel):
    """One stored version of the record: the task as a worker left it at that write."""

    version_id: str | None
    saved_at: datetime
    status: Status
    generation: int
    turn: int
    reason: str | None = None
    state: Any = None
    #: the state was in a blob that is gone (a superseded checkpoint's).
    state_missing: bool = False
    journal: list[JournalEntry] = Field(default_factory=list)
    #: the invocation whose write this version is (its history's last run), if it says.
    invocation: int | None = None


class ParentView(BaseModel):
    """The task a child task belongs to, and where it sits in that task's batch."""

    task_id: str
    #: the batch's id prefix (``ctx.invoke``: the child's own id) and the child's index in it.
    batch: str
    index: int = 0


class ChildView(BaseModel):
    """One child task a task started, as its own record says it is now."""

    task_id: str
    task_name: str
    batch: str
    index: int
    #: None: no record yet (a batch with ``max_concurrency`` starts it when a sibling ends).
    status: Status | None = None
    cost: float | None = None


class TaskView(BaseModel):
    """Everything ``continuum inspect`` shows about one task."""

    task_id: str
    task_name: str
    status: Status
    generation: int
    turn: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    result: Any = None
    error: ErrorInfo | None = None
    #: what it waits for, each open callback with its link when the app has links on.
    waiting_for: list[WaitingFor] = Field(default_factory=list)
    #: why a task that has never run is not running, and what to do (``TaskStatus.hint``).
    hint: str | None = None
    state: Any = None
    counters: Counters
    usage: Usage
    cost: dict[str, float]
    invocations: list[InvocationRun]
    checkpoints: list[Checkpoint]
    parent: ParentView | None = None
    children: list[ChildView] = Field(default_factory=list)
    #: an agent task's model requests, tool calls and approvals in its current turn, in order
    #: (none: not an agent task).
    agent: list[AgentEvent] = Field(default_factory=list)


def inspect_task(
    records: Records,
    task_id: str,
    *,
    versions: int = DEFAULT_VERSIONS,
    links: CallbackLinks | None = None,
) -> TaskView:
    """The view of ``task_id`` from its record and up to ``versions`` earlier versions; each
    open callback has its link when ``links`` is given and has a signing key (as
    ``Client.status`` shows it).

    Raises:
        RecordNotFoundError: no such task.
    """
    record, _ = records.load(check_task_id(task_id))
    checkpoints, runs = _from_versions(records, record, versions)
    for run in record.history:
        _keep(runs, run)
    return TaskView(
        task_id=record.task_id,
        task_name=record.task_name,
        status=record.status,
        generation=record.generation,
        turn=record.turn,
        created_at=record.created_at,
        updated_at=record.updated_at,
        finished_at=record.finished_at,
        result=record.result,
        error=record.error,
        waiting_for=[shown_waiter(record, w, links) for w in waiting_for(record)],
        hint=unstarted_hint(record, records.inbox),
        state=record.state,
        counters=record.counters,
        usage=record.usage,
        cost={k: round(v, 8) for k, v in dollars(record.usage).items()},
        invocations=[runs[n] for n in sorted(runs)],
        checkpoints=checkpoints,
        parent=_parent(record),
        children=_children(records, record),
        agent=agent_events(
            record.journal, lambda digest: records.large_value(record.task_id, digest)
        ),
    )


def _parent(record: TaskRecord) -> ParentView | None:
    link = record.parent
    if link is None:
        return None
    return ParentView(task_id=link.task_id, batch=link.batch, index=link.index)


def _children(records: Records, record: TaskRecord) -> list[ChildView]:
    """Each child the record started, with its status and cost (one GET each)."""
    children: list[ChildView] = []
    for batch in record.children:
        for index, child_id in enumerate(batch.ids()):
            child = ChildView(
                task_id=child_id, task_name=batch.task_name, batch=batch.prefix, index=index
            )
            try:
                found, _ = records.load(child_id)
            except RecordNotFoundError:
                pass
            else:
                child.status = found.status
                child.cost = round(dollars(found.usage)["total"], 8)
            children.append(child)
    return children


def _keep(runs: dict[int, InvocationRun], run: InvocationRun) -> None:
    """Keep the most complete copy of each run: finished over running, more steps over fewer."""
    known = runs.get(run.number)
    if known is None or _completeness(run) >= _completeness(known):
        runs[run.number] = run


def _completeness(run: InvocationRun) -> tuple[int, int, int]:
    return (int(run.outcome != RunOutcome.RUNNING), len(run.steps) + run.steps_dropped, run.hops)


def _from_versions(
    records: Records, record: TaskRecord, most: int
) -> tuple[list[Checkpoint], dict[int, InvocationRun]]:
    checkpoints: list[Checkpoint] = []
    runs: dict[int, InvocationRun] = {}
    for past in records.history(record.task_id, most=most):  # oldest first
        old = past.record
        for run in old.history:
            _keep(runs, run)
        checkpoints.append(
            Checkpoint(
                version_id=past.version,
                saved_at=past.saved_at,
                status=old.status,
                generation=old.generation,
                turn=old.turn,
                reason=_reason(old),
                state=past.state,
                state_missing=past.state_missing,
                journal=old.journal,
                invocation=old.history[-1].number if old.history else None,
            )
        )
    return checkpoints, runs


def _reason(record: TaskRecord) -> str | None:
    """Why the task stopped at this write: its error, or what it suspended or waits for; a
    task that went on keeps its last suspend reason in the record, which no longer holds."""
    if record.error is not None:
        return record.error.message
    if record.status in (Status.SUSPENDED, Status.WAITING):
        return record.suspend_reason
    return None


def summary_line(record: TaskRecord) -> dict[str, Any]:
    """One task as ``continuum list`` shows it."""
    return {
        "task_id": record.task_id,
        "task": record.task_name,
        "status": record.status.value,
        "turn": record.turn,
        "invocations": record.counters.invocations,
        "updated_at": record.updated_at.isoformat(),
        "cost": round(dollars(record.usage)["total"], 6),
    }


def to_json(view: TaskView) -> str:
    return json.dumps(view.model_dump(mode="json"), indent=1)
