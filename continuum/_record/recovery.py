"""Recovery after a worker died holding a task: whom to blame, and when to stop looking.

A worker that dies (killed, out of memory, past its deadline) leaves the record ``running``
with an expired lease. The next claim notes the death; the workers after it run in
recovery (they save a marker before each step) until the task suspends or finishes, so that a
step that kills its worker every time is named and the task fails instead of looping.
"""

from __future__ import annotations

from continuum._record.model import ErrorInfo, TaskRecord


def note_death(record: TaskRecord) -> None:
    """Account for a worker that died holding the record.

    Only a death while a marked step was running counts against that step; a step that
    kills its worker every time then fails the task after ``max_step_crashes`` deaths
    instead of looping. Deaths elsewhere (during a claim or a save) blame no step. Either
    way, the next workers run in recovery until the task suspends (``TaskRecord.recovering``).
    """
    marker = record.running_step
    if marker is not None:
        record.crashes = record.crashes + 1 if record.crash_at == marker else 1
        record.crash_at = marker
    record.running_step = None
    record.recovering = True
    record.counters.recoveries += 1


def end_recovery(record: TaskRecord) -> None:
    """The task suspended or finished: leave recovery and forget past deaths."""
    record.recovering, record.running_step = False, None
    record.crashes, record.crash_at = 0, None


def mark_step(record: TaskRecord, position: int, key: str, max_crashes: int) -> ErrorInfo | None:
    """In recovery, before a step: mark it as running (saved next), or, if the last
    ``max_crashes`` deaths all came while it ran, the error that fails the task instead."""
    here = f"{record.turn}:{position}:{key}"
    if record.crashes >= max_crashes and record.crash_at == here:
        return ErrorInfo(
            type="StepCrashedWorker",
            message=(
                f"step {key!r} was running each of the last {record.crashes} times its worker "
                "died (killed, out of memory, or past the invocation deadline); failing the "
                "task rather than trying again"
            ),
            step=key,
            turn=record.turn,
        )
    record.running_step = here
    return None
