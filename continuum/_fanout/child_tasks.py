"""Parents and children: what links a child task to its parent, and what it reports.

A child task (``ctx.invoke``, ``ctx.map_tasks``) has its own record and invocations. Its id
derives from its parent's id and the call's place in the parent's journal, so a replayed call
never starts it twice. When it finishes it reports to its parent with one small object in the
parent's inbox (``children/{child_id}/{status}.json``, written If-None-Match) and one wake;
the parent's record is not written once per child, and the parent waits with no compute.

For ``map_tasks`` the parent creates every child's record at once (pending) and starts the
first ``max_concurrency``; each child, when it finishes, starts the next one itself
(``ParentLink.successor``), so that a slot freed needs no invocation of the parent. A wake
from a child says which batch it belongs to (``Continuation.batch``), so the worker can judge
from one LIST of the parent's inbox, without reading the parent's record, whether the batch
can decide yet (``continuum._waits.kinds.child_wait`` judges it); and whether its report can
be the deciding one at all (a child with a successor and no completion policy cannot: its
successor reports after it), so that only those wakes LIST.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from continuum._base.threads import in_parallel
from continuum._record.continuation import Continuations
from continuum._record.model import ErrorInfo, Status, TaskRecord, check_task_id
from continuum._record.persistence import Records
from continuum._record.waiting_for import BatchHint, ParentLink
from continuum._steps.control_flow import Abort, Suspend
from continuum.backends.queue import QueueError
from continuum.backends.store import StoreError
from continuum.errors import ContinuumError, RecordNotFoundError, TaskFinishedError

if TYPE_CHECKING:
    from continuum._record.model import JournalEntry
    from continuum._steps.turn_state import TurnState

#: Threads that create a chunk's child records, read reports, or cancel children.
CHILD_THREADS = 8
#: A parent whose child's create or start the store or the queue refused (after botocore's
#: own retries) tries again after this pause, doubled at each refusal in a row, as a backoff.
REFUSED_START_PAUSE_S = 2.0
#: The longest pause between two tries of a refused child start.
REFUSED_START_MAX_PAUSE_S = 60.0
#: Refusals in a row after which the parent fails naming the child: about 16 minutes of
#: pauses, past a queue's throttling; what lasts longer is a missing queue or permission.
MAX_REFUSED_STARTS = 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Of a long parent id, the characters a digested child id keeps: 90 + 1 + 24 leaves room
#: in the 128 of a task id for ``.{index}`` up to 12 digits.
_KEPT_OF_PARENT = 90


def child_id(parent_id: str, *, turn: int, path: str, key: str, index: int | None) -> str:
    """The id of a parent's child: readable, a safe S3 key segment, the same on every replay.

    ``{parent}.{turn}.{key}`` (``.{index}`` in a batch), with unsafe characters replaced;
    longer than 100 characters, a digest stands in for the tail, short enough that the
    ``.{index}`` of any batch a task can hold still fits in a task id.
    """
    place = _UNSAFE.sub("-", f"{path}{key}").strip("-.") or "child"
    base = f"{parent_id}.{turn}.{place}"
    if len(base) > 100:
        digest = hashlib.sha256(base.encode()).hexdigest()[:24]
        base = f"{parent_id[:_KEPT_OF_PARENT]}.{digest}"
    return check_task_id(base if index is None else f"{base}.{index}")


class ChildIdTakenError(ContinuumError):
    """A child's id is held by a task that is not that child (started earlier under it)."""


def names_slot(link: ParentLink | None, slot: ParentLink) -> bool:
    """Whether a record's parent ``link`` is the parent, batch and place of ``slot``: a
    parent adopts only a child whose record names it."""
    return (
        link is not None
        and link.task_id == slot.task_id
        and link.batch == slot.batch
        and link.index == slot.index
    )


class ChildClient(Protocol):
    """What starting and cancelling children takes of a client (``client.Client``)."""

    continuations: Continuations
    records: Records

    def start_child(
        self,
        task_name: str,
        input: Any,
        task_id: str,
        parent: ParentLink,
        *,
        send: bool,
        traceparent: str | None = None,
    ) -> str: ...

    def cancel(self, task_id: str, reason: str | None = None) -> None: ...


class ChildTasks:
    """What a turn needs to start its children: a client of the same app, made on first use
    by ``make_client`` (most tasks start no child; a worker need not load the client)."""

    def __init__(self, make_client: Callable[[], ChildClient]) -> None:
        self._make_client = make_client
        self._client: ChildClient | None = None

    @property
    def client(self) -> ChildClient:
        # Two threads of a batch may both make one: either serves (a client holds no state).
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def create(
        self,
        task_name: str,
        input: Any,
        task_id: str,
        parent: ParentLink,
        traceparent: str | None = None,
    ) -> bool:
        """Create a child's record, pending (a second create of the same id is a no-op),
        hanging in its parent's trace under ``traceparent``;
        False if the id is held by a task whose record does not name this parent's slot.
        Both this and ``start`` run in the parent's turn: a store or queue error suspends
        it (``StartRefused``; the next invocation creates or starts again) instead of
        failing the parent."""
        with _refused_as(task_id):
            try:
                self.client.start_child(
                    task_name, input, task_id, parent, send=False, traceparent=traceparent
                )
            except ChildIdTakenError:
                return False
        return True

    def report_taken(self, parent: ParentLink, task_id: str) -> ErrorInfo:
        """Report a taken slot to the parent's own inbox, failed, as its child would have."""
        from continuum._record.inbox_items import (
            ChildReport,  # loaded with the first child's report
        )

        error = ErrorInfo(
            type=ChildIdTakenError.__name__,
            message=f"child task id {task_id} is taken by a task that is not a child of "
            f"{parent.task_id}; that task was left alone",
        )
        report = ChildReport(child_id=task_id, index=parent.index, status="failed", error=error)
        with _refused_as(task_id):
            self.client.records.inbox.put_child_report(parent.task_id, task_id, "failed", report)
        return error

    def relink(self, task_id: str, successor: str | None) -> None:
        """Point a created child, not started yet, past its successor's taken slot."""
        with _refused_as(task_id):
            records = self.client.records
            record, revision = records.load(task_id)
            if record.parent is None or record.parent.successor == successor:
                return
            record.parent = record.parent.model_copy(update={"successor": successor})
            try:
                records.swap(record, revision=revision)
            except ContinuumError as exc:
                raise Suspend(f"could not relink child {task_id} ({exc}); continuing") from exc

    def start(self, task_id: str) -> None:
        """Send a created child's first continuation (a duplicate is fenced like any)."""
        with _refused_as(task_id):
            self.client.continuations.send(task_id, generation=0, reason="start")

    def cancel(self, ids: list[str], reason: str) -> None:
        """Cancel children that exist and have not finished (the rest are skipped)."""

        def one(task_id: str) -> None:
            with contextlib.suppress(TaskFinishedError, RecordNotFoundError):
                self.client.cancel(task_id, reason)

        in_parallel(one, ids, threads=CHILD_THREADS)


class StartRefused(Suspend):
    """The store or the queue refused a child's create or start: the parent suspends, and
    ``paused_when_refused`` makes that a pause (a plain suspension where it is not used)."""

    def __init__(self, child: str, error: StoreError | QueueError) -> None:
        self.child = child
        self.error = error
        super().__init__(f"could not start child task {child} ({error})")


@contextlib.contextmanager
def _refused_as(child: str) -> Iterator[None]:
    try:
        yield
    except (StoreError, QueueError) as exc:
        raise StartRefused(child, exc) from exc


#: The key of a children entry's cursor that counts its refused starts in a row.
_REFUSED = "refused"


@contextlib.contextmanager
def paused_when_refused(state: TurnState, entry: JournalEntry) -> Iterator[None]:
    """Around a parent's creates and starts of the children journaled at ``entry``: a
    refusal suspends the parent for a pause, doubled at each refusal in a row (counted in
    the entry's cursor, which the suspension saves), and so not a suspension without
    progress; at ``MAX_REFUSED_STARTS`` in a row the parent fails naming the child."""
    before = _without_refusals(entry.cursor)
    try:
        yield
    except StartRefused as refusal:
        done = _without_refusals(entry.cursor)
        # Children created or started since the last refusal: a new run of refusals.
        refused = 1 + (int((entry.cursor or {}).get(_REFUSED, 0)) if done == before else 0)
        if refused >= MAX_REFUSED_STARTS:
            entry.cursor = done or None  # a retry, once fixed, has the full patience again
            raise state.unwind(Abort(_refused_error(state, entry, refusal, refused))) from None
        entry.cursor = {**done, _REFUSED: refused}
        pause_s = min(REFUSED_START_PAUSE_S * 2 ** (refused - 1), REFUSED_START_MAX_PAUSE_S)
        reason = f"{refusal.reason}; trying again in {pause_s:.0f}s ({refused} refused in a row)"
        raise state.unwind(Suspend(reason, delay_s=pause_s)) from None
    if entry.cursor and _REFUSED in entry.cursor:
        entry.cursor = _without_refusals(entry.cursor) or None


def _without_refusals(cursor: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (cursor or {}).items() if k != _REFUSED}


def _refused_error(
    state: TurnState, entry: JournalEntry, refusal: StartRefused, refused: int
) -> ErrorInfo:
    task_id = state.scope.record.task_id
    return ErrorInfo(
        type="ChildStartRefused",
        message=f"child task {refusal.child} of {task_id} could not be started: the store "
        f"or the queue refused it {refused} times in a row, pausing up to "
        f"{REFUSED_START_MAX_PAUSE_S:.0f}s between tries (last: {refusal.error}). Check "
        f"that the bucket and the queue exist and that the worker may write to them, then "
        f"`continuum retry {task_id}`",
        step=entry.key,
        turn=state.scope.record.turn,
    )


def cancel_children(children: ChildTasks | None, record: TaskRecord) -> None:
    """A cancelled parent cancels its children that have not finished. Idempotent: called
    when it finishes and again for any message that finds it cancelled (a store or queue
    error raises, so that the message comes back)."""
    if record.status == Status.CANCELLED and record.children and children is not None:
        ids = [child for batch in record.children for child in batch.ids()]
        children.cancel(ids, f"its parent {record.task_id} was cancelled")


def report_to_parent(
    records: Records, continuations: Continuations, record: TaskRecord, *, again: bool = False
) -> None:
    """A finished child: write its report to its parent, wake the parent, start the next.

    Idempotent; called when the child finishes and ``again`` for any message that finds it
    finished (a worker may have died in between). Again, it starts the next child only if
    that one is still pending: else every message a finished child gets (a cancel's wake, a
    duplicate start) would be passed down the chain of finished successors, each passing on
    all it got, so that a batch cut short sends messages quadratic in its size.
    """
    link = record.parent
    if link is None or not record.status.finished:
        return
    status = {Status.SUCCEEDED: "succeeded", Status.FAILED: "failed"}.get(
        record.status, "cancelled"
    )
    from continuum._record.inbox_items import ChildReport  # loaded by the first child's report

    report = ChildReport(
        child_id=record.task_id,
        index=link.index,
        status=status,
        result=record.result,
        error=record.error,
    )
    records.inbox.put_child_report(link.task_id, record.task_id, status, report)
    hint = BatchHint(
        prefix=link.batch,
        count=link.count,
        completion=link.completion,
        # Its successor reports after it: unless a policy may stop the batch early, the
        # decision is left to a later report's wake (no LIST for this one). A repeated
        # report LISTs: its successor may have reported first (started out of order by an
        # operator, or cancelled while pending), and is not started again.
        decides=again or link.successor is None or link.completion is not None,
    )
    continuations.send(
        link.task_id,
        generation=0,
        reason=f"child {record.task_id} {status}",
        kind="wake",
        batch=hint,
    )
    if link.successor is not None and (not again or _pending(records, link.successor)):
        continuations.send(link.successor, generation=0, reason="start")


def _pending(records: Records, task_id: str) -> bool:
    try:
        return records.load(task_id)[0].status == Status.PENDING
    except RecordNotFoundError:
        return False


def unstarted_predecessor(records: Records, record: TaskRecord) -> str | None:
    """For a batch child that never ran: the sibling whose finish starts it, while that one
    has not finished (until then the child's start is its batch's to send, so that no more
    than ``max_concurrency`` run at once); None for any other task."""
    link = record.parent
    never_ran = record.status == Status.PENDING and not record.counters.invocations
    if link is None or not never_ran or not link.max_concurrency:
        return None
    index = link.index - link.max_concurrency
    while index >= 0:
        sibling_id = f"{link.batch}.{index}"
        try:
            sibling, _ = records.load(sibling_id)
        except RecordNotFoundError:
            sibling = None
        slot = link.model_copy(update={"index": index})
        if sibling is not None and names_slot(sibling.parent, slot):
            return None if sibling.status.finished else sibling_id
        index -= link.max_concurrency  # a taken slot: the chain passes over it
    return None
