"""What the record durably holds, told to the observers as it changes (``operations_saved``).

An invocation that has an observer of it keeps, for each operation of the journal it last
wrote, a short signature of its status; after each write of the record it tells the
operations whose signature changed, and every operation the record holds. A turn that ends
clears the journal (its effect is in the state): what it changed is told at the next write,
with it. Nothing is built unless an observer wants the event.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from continuum._base.clock import now_s
from continuum._define.observers import Observers
from continuum._record.model import JournalEntry, walk_with_paths

if TYPE_CHECKING:
    from continuum._define.events import SavedOperation
    from continuum._worker.claim import Claim

#: What an operation's status is made of: a change of any tells it again.
Signature = tuple[Any, ...]


def signature(entry: JournalEntry) -> Signature:
    return (
        entry.ok,
        entry.partial,
        entry.attempts,
        entry.retry_at,
        entry.started,
        entry.cursor,
        entry.ended,
    )


def status_of(entry: JournalEntry) -> str:
    if entry.retry_at is not None:
        return "pending"
    if entry.ended is not None:  # an asyncio task's context: its entry keeps its order only
        return "ended"
    if entry.partial or entry.started:
        return "started"
    return "succeeded" if entry.ok else "failed"


class SavedOperations:
    """The operations an invocation's record held at its last write, and the observers to
    tell of what each next write changed (``claim.saved`` calls ``saved``)."""

    def __init__(self, observers: Observers, claim: Claim) -> None:
        self.observers, self.claim = observers, claim
        record = claim.record
        self.known = {path + e.key: signature(e) for path, e in walk_with_paths(record.journal)}
        self.started_at = claim.run.started_at.timestamp() if claim.run is not None else 0.0
        #: what turns that ended since the last write held, and which of it changed.
        self.ended: dict[tuple[int, str], SavedOperation] = {}
        self.changed: list[SavedOperation] = []

    def turn_ending(self, journal: list[JournalEntry]) -> None:
        """A turn ends and its journal is about to be cleared: keep what it changed."""
        operations, changed, _ = self._compare(journal)
        self.ended.update(operations)
        self.changed.extend(changed)
        self.known = {}

    def saved(self) -> None:
        """The record was written: tell what changed since the last write."""
        record = self.claim.record
        operations, changed, self.known = self._compare(record.journal)
        updated = [*self.changed, *changed]
        held = {**self.ended, **operations}
        self.ended, self.changed = {}, []
        if not updated:
            return
        from continuum._define.events import OperationsSaved

        event = OperationsSaved(
            task_id=record.task_id,
            task_name=record.task_name,
            turn=record.turn,
            saved_at=now_s(),
            request_id=self.claim.lease.owner,
            updated=tuple(updated),
            operations=tuple(held.values()),
        )
        self.observers.emit("operations_saved", event)

    def _compare(
        self, journal: list[JournalEntry]
    ) -> tuple[dict[tuple[int, str], SavedOperation], list[SavedOperation], dict[str, Signature]]:
        """Every operation of ``journal``, those whose signature is not the known one, and
        every signature."""
        operations: dict[tuple[int, str], SavedOperation] = {}
        changed, signatures = [], {}
        for op, entry in self._entries(journal):
            operations[op.turn, op.id], signatures[op.id] = op, signature(entry)
            if self.known.get(op.id) != signatures[op.id]:
                changed.append(op)
        return operations, changed, signatures

    def _entries(
        self, journal: list[JournalEntry]
    ) -> Iterator[tuple[SavedOperation, JournalEntry]]:
        from continuum._define.events import SavedOperation

        turn = self.claim.record.turn
        for path, entry in walk_with_paths(journal):
            op_id = path + entry.key
            parent, _, _ = op_id.rpartition("/")
            since, ended = entry.since, None
            # the journal keeps a step's first start and its last attempt's length: one
            # attempt that ended is the only end it knows
            done = not (entry.partial or entry.started)
            if since is not None and entry.kind == "step" and entry.attempts == 1 and done:
                ended = since + entry.duration_s
            error = entry.error
            op = SavedOperation(
                id=op_id,
                turn=turn,
                name=entry.name,
                kind=str(entry.kind),
                status=status_of(entry),
                parent_id=parent or None,
                started_at=since,
                ended_at=ended,
                attempt=entry.attempts,
                error=error.message if error is not None else None,
                error_type=error.type if error is not None else None,
                replay=since is not None and since < self.started_at,
            )
            yield op, entry
