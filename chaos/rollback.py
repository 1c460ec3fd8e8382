"""A rollback during the run: a worker of the older release takes messages for a while.

The fleet runs ``sleeper`` at version 2 (``chaos.flows``). For ``ROLLBACK_S`` seconds from
the start of the first sleeper, one more fleet worker runs the older release (``python -m
chaos.worker --older-until T``), whose ``sleeper`` is version 1: it takes the messages of
sleeper tasks it receives, as a worker of a rolled-back release would (their starts,
continuations, wakes and the early timers of their sleeps), and must leave each record
untouched (no claim, no hop) and send the message again; once the rollback ends, the fleet
(rolled forward) resumes the task. The older ``sleeper`` fails its task if it ever runs, so
the sleeper's checked ending catches a worker that ran a newer record; every record write of
a sleeper the older worker makes is a violation (it must make none).

The older release differs only in ``sleeper``: the older worker runs every other message with
the fleet's own app, faults and event log included. (A harness-side older worker that put
those messages back, visibility 0, spent one of their receives each time, and drove messages
of a backlog to the dead-letter queue before any fleet worker saw them.)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from chaos.base import app as newer_app
from chaos.checks import Report
from continuum import Continuum, TaskContext
from continuum._turn.tasks import Task

#: How long the rollback lasts (the older worker's life, from the first sleeper's start).
ROLLBACK_S = 20.0
#: The task whose older version the older worker runs.
ROLLED = "sleeper"
OLDER_WROTE = "records an older worker wrote"


class _Any(BaseModel):
    model_config = {"extra": "allow"}


def _older_sleeper(ctx: TaskContext[Any]) -> Any:
    raise AssertionError("version-1 code ran a record that version 2 wrote")


def older_app() -> Continuum:
    """The chaos app as the older release had it: ``sleeper`` at version 1."""
    settings = newer_app.settings
    older = Continuum(
        default_step_s=settings.default_step_s,
        persist_every_s=settings.persist_every_s,
        visibility_margin_s=settings.visibility_margin_s,
        inline_limit_bytes=settings.inline_limit_bytes,
        safety_margin_s=settings.safety_margin_s,
        inbox_poll_s=settings.inbox_poll_s,
        max_state_bytes=settings.max_state_bytes,
    )
    for name, task in newer_app.registry.tasks.items():
        if name != ROLLED:
            older.registry.tasks[name] = task
    older.registry.tasks[ROLLED] = Task(_older_sleeper, ROLLED, _Any, version=1)
    return older


def check(report: Report, events: list[dict[str, Any]]) -> None:
    """The older worker's messages of sleepers, and the sleeper records it wrote (none)."""
    older = {e["pid"] for e in events if e["ev"] == "start" and e.get("older")}
    ours = [e for e in events if e.get("pid") in older and runs_older(e.get("task_id"))]
    handled = sum(1 for e in ours if e["ev"] == "invoked")
    report.add("older worker sleeper messages handled", handled, "messages")
    wrote = [e for e in ours if e["ev"] == "write"]
    for e in wrote:
        report.violate(OLDER_WROTE, f"{e['task_id']}: {e['kind']} by {e['inv']}")
    report.add(OLDER_WROTE, len(wrote), "records")


def runs_older(task_id: Any) -> bool:
    """Does the older release run this task's messages with code of its own?"""
    return isinstance(task_id, str) and task_id.startswith(f"{ROLLED}-")
