"""Which children a parent adopts, and which of their reports count.

A parent adopts only a child whose record names it: a child id another task held first is
that child's place failed (``ChildIdTakenError``), reported by the parent to its own inbox,
passed over by its chain of successors and spared by a cancel of the parent. A failed
child's report does not count while the child runs again (an operator retried it): the
parent waits for its next report.
"""

from __future__ import annotations

from collections.abc import Callable

from continuum._base.threads import in_parallel
from continuum._fanout.child_tasks import CHILD_THREADS, ChildTasks
from continuum._record.waiting_for import ParentLink
from continuum._steps.control_flow import Suspend
from continuum._steps.turn_state import TurnState
from continuum.backends.store import StoreError
from continuum.errors import ContinuumError


def running_again(
    state: TurnState, starter: ChildTasks, found: dict[str, str], task_id: str
) -> dict[str, str]:
    """The reports without those of children retried since they failed: until a retried
    child ends again, its earlier report is not its outcome (one GET per failed report)."""
    ended = [child for child, status in found.items() if status != "succeeded"]
    if not ended:
        return found
    records = starter.client.records

    def again(child: str) -> bool:
        try:
            record, _ = records.load(child)
        except ContinuumError:
            return False  # a slot taken by another task, or gone: its report stands
        link = record.parent
        return link is not None and link.task_id == task_id and not record.status.finished

    unread: StoreError | None = None
    with state.unlocked():
        try:
            running = in_parallel(again, ended, threads=CHILD_THREADS)
        except StoreError as exc:  # a transient fault must not fail the parent
            unread = exc
    if unread is not None:
        raise Suspend(f"could not read a child task's record ({unread}); continuing afresh")
    dropped = {child for child, busy in zip(ended, running, strict=True) if busy}
    return {child: status for child, status in found.items() if child not in dropped}


def pass_over_taken(
    state: TurnState,
    starter: ChildTasks,
    prefix: str,
    taken: set[int],
    limit: int | None,
    n: int,
    link_of: Callable[[int], ParentLink],
) -> None:
    """Before any child starts: report each taken slot failed in the parent's own inbox, and
    point each child whose successor is a taken slot at the next of its own in the chain."""
    mark_taken(state, prefix, [f"{prefix}.{i}" for i in sorted(taken)])
    with state.unlocked():
        for i in sorted(taken):
            starter.report_taken(link_of(i), f"{prefix}.{i}")
        if limit is not None:
            for i in range(n):
                if i in taken or i + limit >= n or i + limit not in taken:
                    continue
                after = i + limit
                while after < n and after in taken:
                    after += limit
                starter.relink(f"{prefix}.{i}", f"{prefix}.{after}" if after < n else None)
    state.note_inbox()


def mark_taken(state: TurnState, prefix: str, ids: list[str]) -> None:
    """Name the taken ids in the record's batch, so that a cancel of the parent spares them."""
    for batch in state.scope.record.children:
        if batch.prefix == prefix:
            batch.taken = sorted(set(batch.taken) | set(ids))
    state.progress = True
