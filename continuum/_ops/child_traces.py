"""Where a child task's retried run hangs in its parent's trace, when the parent's retry
retries it: under the wait of the parent's new run that waits for it. The child's record
holds the ``traceparent`` of the wait that started it; every span of a retried run has ids of
that run, so the parent's new run waits under another span id, which the child must be told.
"""

from __future__ import annotations

from continuum._base.trace_ids import task_trace_id, traceparent, wait_span_id
from continuum._fanout.child_tasks import child_id
from continuum._record.model import EntryKind, TaskRecord, walk_with_paths


def retried_children_traceparents(
    record: TaskRecord, stack: str, children: list[str]
) -> dict[str, str]:
    """child id -> the ``traceparent`` its next run hangs under, for those of ``children``
    whose call the parent's next run (after ``record``'s retries, plus one) waits in.

    A call made in a virtual child context is not found (its path is not in the journal): its
    children keep the wait that started them.
    """
    trace = task_trace_id(stack, record.task_id, record.traceparent if record.parent else None)
    waits: dict[str, str] = {}  # the id (a batch's: its prefix) of each call's children -> its wait
    for path, entry in walk_with_paths(record.journal):
        if entry.kind != EntryKind.CHILDREN:
            continue
        base = child_id(record.task_id, turn=record.turn, path=path, key=entry.key, index=None)
        if base != entry.ref:
            continue  # not where it was made: a virtual child context's, whose path is unknown
        retries = record.counters.retries + 1
        span = wait_span_id(
            stack, record.task_id, record.turn, path + entry.key, entry.since, retries
        )
        waits[base] = traceparent(trace, span)
    found = {}
    for child in children:
        batch, _, index = child.rpartition(".")
        wait = waits.get(child) or (waits.get(batch) if index.isdigit() else None)
        if wait is not None:
            found[child] = wait
    return found
