"""What the timeline page draws, worked out from a :class:`TaskView`.

The page shows one row per invocation, on one scale of seconds since that invocation began
(so a two-day wait cannot squash the bars), with its steps inside its bar. Between two rows
is the gap between them: a wait (the first ended ``waiting``: what it waited for, its timer
hops, what woke it), a continuation (it ended ``suspended``) or a redelivery (it
``crashed``: its message came back after the visibility timeout). Each checkpoint (stored
version of the record) goes to the invocation that wrote it, or to the gap it was written in
(a long wait's timer hops write one each). The browser only lays this out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from continuum._ops.inspection import Checkpoint, TaskView
from continuum._record.history import InvocationRun, RunOutcome
from continuum._record.model import Status

#: S3 gives a version's LastModified to the second: a checkpoint saved up to this long before
#: an invocation's recorded start still belongs to it.
CLOCK_SLACK_S = 1.0
#: The scale of an empty timeline (no invocation ran yet), so that nothing divides by zero.
MIN_SCALE_S = 0.001


def timeline_data(view: TaskView) -> dict[str, Any]:
    """The page's data: the task, its rows (invocations and the gaps between them) and its
    checkpoints, as JSON-ready values."""
    runs = view.invocations
    owners = [_owner(checkpoint, runs) for checkpoint in view.checkpoints]
    rows: list[dict[str, Any]] = []
    for index, run in enumerate(runs):
        if index:
            rows.append(_gap(runs[index - 1], run, _checkpoints(owners, ("gap", index - 1))))
        rows.append(_run(run, _checkpoints(owners, ("run", index))))
    if runs and (tail := _tail(view, runs[-1])) is not None:
        tail["checkpoints"] = _checkpoints(owners, ("gap", len(runs) - 1))
        rows.append(tail)
    task = view.model_dump(mode="json", exclude={"invocations", "checkpoints"})
    extents = [row["extent_s"] for row in rows if row["kind"] == "run"]
    return {
        "task": task,
        "scale_s": max([MIN_SCALE_S, *extents]),
        "rows": rows,
        "checkpoints": [
            {"index": i, "row": _row_name(owner, runs), **checkpoint.model_dump(mode="json")}
            for i, (checkpoint, owner) in enumerate(zip(view.checkpoints, owners, strict=True))
        ],
        "summary": _summary(view, rows),
    }


def extent_s(run: InvocationRun) -> float:
    """How long the run's bar is: its measured duration; for a run that never ended (it
    crashed, or runs now), up to the end of its last step."""
    if run.duration_s is not None:
        return max(run.duration_s, _steps_end_s(run))
    if run.ended_at is not None:
        return max((run.ended_at - run.started_at).total_seconds(), _steps_end_s(run))
    return _steps_end_s(run)


def _steps_end_s(run: InvocationRun) -> float:
    start = run.started_at.timestamp()
    return max([0.0, *(s.started + s.duration_s - start for s in run.steps)])


def _end(run: InvocationRun) -> datetime:
    if run.ended_at is not None:
        return run.ended_at
    return datetime.fromtimestamp(run.started_at.timestamp() + extent_s(run), run.started_at.tzinfo)


def _run(run: InvocationRun, checkpoints: list[int]) -> dict[str, Any]:
    start = run.started_at.timestamp()
    data = run.model_dump(mode="json", exclude={"steps", "request_id"})
    data.update(
        kind="run",
        extent_s=round(extent_s(run), 6),
        checkpoints=checkpoints,
        steps=[
            {
                "key": s.key,
                **step_names(s.key),
                "turn": s.turn,
                "at_s": round(max(0.0, s.started - start), 6),
                "duration_s": s.duration_s,
                "attempts": s.attempts,
                "outcome": s.outcome,
            }
            for s in run.steps
        ],
    )
    return data


def step_names(key: str) -> dict[str, str | None]:
    """A step's name (its key without the call's ``#n``), and in a child context (a map item,
    a parallel branch, a block) which one: ``claims#0/2/check#0`` is ``check`` of
    ``claims#0 item 2``."""
    path, _, own = key.rpartition("/")
    parts: list[str] = []
    for part in path.split("/") if path else []:
        if part.isdigit() and parts:
            parts[-1] += f" item {part}"
        else:
            parts.append(part)
    return {"name": own.rpartition("#")[0] or own, "item": " / ".join(parts) or None}


def _gap(before: InvocationRun, after: InvocationRun, checkpoints: list[int]) -> dict[str, Any]:
    """The time between two invocations, and why there was one."""
    waited = before.outcome == RunOutcome.WAITING
    return {
        "kind": "gap",
        "after": before.outcome.value,
        "seconds": round(max(0.0, (after.started_at - _end(before)).total_seconds()), 6),
        "waited_for": [w.model_dump(mode="json") for w in before.waiting_for] if waited else [],
        "hops": before.hops,
        "woken_by": after.message,
        "open": False,
        "checkpoints": checkpoints,
    }


def _tail(view: TaskView, last: InvocationRun) -> dict[str, Any] | None:
    """The gap after the last invocation, while the task waits or is suspended now."""
    if view.status.finished or last.outcome == RunOutcome.RUNNING:
        return None
    return {
        "kind": "gap",
        "after": last.outcome.value,
        "seconds": None,
        "since": _end(last).isoformat(),
        "waited_for": [w.model_dump(mode="json") for w in view.waiting_for],
        "hops": last.hops,
        "woken_by": None,
        "open": True,
    }


def _owner(checkpoint: Checkpoint, runs: list[InvocationRun]) -> tuple[str, int]:
    """The row a checkpoint belongs to: ("run", i) if invocation i wrote it, ("gap", i) if it
    was written after invocation i ended (a timer hop, a retry or a fork from outside).

    A run writes ``running`` at its own generation (its claim, its saves), and ends with
    ``suspended`` or ``waiting`` at the next one, or finished at either; among the runs that
    had started by then (give or take the clock's slack), the latest that could have written
    it did. What no run wrote goes to the gap it was written in.
    """
    number = getattr(checkpoint, "invocation", None)  # the latest run in that version
    for index, run in enumerate(runs):
        if isinstance(number, int) and run.number == number:
            wrote = checkpoint.status == Status.PENDING or _wrote(run, checkpoint)
            return ("run", index) if wrote else ("gap", index)
    saved = checkpoint.saved_at.timestamp()
    started = [
        i for i, run in enumerate(runs) if run.started_at.timestamp() <= saved + CLOCK_SLACK_S
    ]
    for index in reversed(started):
        if _wrote(runs[index], checkpoint):
            return ("run", index)
    before = [i for i in started if runs[i].started_at.timestamp() <= saved]
    if checkpoint.status == Status.PENDING or not before:
        return ("run", 0)
    return ("gap", before[-1])


def _wrote(run: InvocationRun, checkpoint: Checkpoint) -> bool:
    generation, status = checkpoint.generation, checkpoint.status
    if status == Status.RUNNING:
        return generation == run.generation
    if status.value != run.outcome.value:
        return False
    if status in (Status.SUSPENDED, Status.WAITING):
        return generation == run.generation + 1
    return generation in (run.generation, run.generation + 1)


def _row_name(owner: tuple[str, int], runs: list[InvocationRun]) -> dict[str, Any] | None:
    """Which row a checkpoint is on: the invocation that wrote it, or the one before its gap."""
    kind, index = owner
    return {"kind": kind, "number": runs[index].number} if runs else None


def _checkpoints(owners: list[tuple[str, int]], row: tuple[str, int]) -> list[int]:
    return [i for i, owner in enumerate(owners) if owner == row]


def _summary(view: TaskView, rows: list[dict[str, Any]]) -> dict[str, Any]:
    end = view.finished_at or view.updated_at
    gaps = [row for row in rows if row["kind"] == "gap" and row["seconds"] is not None]
    return {
        "invocations": len(view.invocations),
        "span_s": round((end - view.created_at).total_seconds(), 3),
        "compute_s": round(sum(r.duration_s or 0.0 for r in view.invocations), 3),
        "waited_s": round(sum(g["seconds"] for g in gaps if g["after"] == "waiting"), 3),
        "crashes": sum(r.outcome == RunOutcome.CRASHED for r in view.invocations),
        "suspensions": sum(r.outcome == RunOutcome.SUSPENDED for r in view.invocations),
        "hops": sum(r.hops for r in view.invocations),
    }
