"""One invocation's hold on a task, from the claim to the ending: steps 3 and 4 of the protocol.

The worker (``worker.py``) fenced the message and claimed the record; an :class:`Invocation`
then migrates an older state, runs the turns (``continuum._turn.loop``) under this invocation's
budget, and ends the hold (``endings.py``): suspended, waiting or finished. The observers hear
of the invocation's start and end.
"""

from __future__ import annotations

import contextlib
from typing import Any

from continuum._base.clock import now_s
from continuum._define.observers import Observers
from continuum._define.settings import Settings
from continuum._fanout.child_tasks import ChildTasks
from continuum._record.continuation import Continuation
from continuum._record.history import RunOutcome
from continuum._record.inbox import Listing
from continuum._record.model import ErrorInfo, Status
from continuum._record.persistence import Records
from continuum._steps.budget import Budget
from continuum._steps.control_flow import Suspend
from continuum._steps.task_inbox import TaskInbox
from continuum._turn.loop import Cancelled, Failed, Lost, Returned, Suspended, TurnLoop, Waiting
from continuum._turn.tasks import Task
from continuum._worker.claim import Claim, error_info
from continuum._worker.endings import Endings, Outcome
from continuum._worker.sqs_batch import LambdaContext, logger, remaining_s
from continuum.errors import MigrationError


class Invocation:
    """A claimed task in one invocation.

    Args:
        claim: this worker's hold on the record.
        task: the task's definition (None: the app has no such task).
        context: the Lambda context (its remaining time is the budget).
        records: where the records and their inboxes are.
        settings: the budget policy, limits and margins.
        endings: how the hold ends.
        observers: who hears of it.
        children: starts child tasks.
    """

    def __init__(
        self,
        claim: Claim,
        task: Task[Any] | None,
        context: LambdaContext,
        *,
        records: Records,
        settings: Settings,
        endings: Endings,
        observers: Observers,
        children: ChildTasks | None = None,
    ) -> None:
        self.claim, self.task, self.context = claim, task, context
        self.records, self.settings = records, settings
        self.endings, self.observers = endings, observers
        self.children = children

    def fail(self, error: ErrorInfo) -> Outcome:
        """End the hold with the task failed (before any turn ran)."""
        return self.endings.finish(self.claim, Status.FAILED, error)

    def run(self, message: Continuation, message_id: str, listing: Listing | None) -> Outcome:
        """Migrate, run the turns, end the hold; tell the observers."""
        claim, record, task = self.claim, self.claim.record, self.task
        assert task is not None
        if self.observers.wants("invocation_started"):
            from continuum._define.events import InvocationStarted

            self.observers.emit(
                "invocation_started",
                InvocationStarted(
                    task_id=record.task_id,
                    task_name=record.task_name,
                    generation=record.generation,
                    turn=record.turn,
                    message=message.kind if message.reason != "start" else "start",
                    first=record.counters.invocations == 1,
                    stack=self.records.stack,
                    **started_facts(claim),
                ),
            )
        if record.state_version < task.version:
            try:
                record.state = task.migrate(record.state, record.state_version, task_id=task.name)
            except MigrationError as exc:
                return self._told_ended(self.fail(error_info(exc, record)))
            record.state_version = task.version
        return self._told_ended(self._end(self._turns(listing), message_id))

    def _told_ended(self, ended: Outcome) -> Outcome:
        """Tell the observers the invocation's hold ended (``ended``); return it."""
        claim, record = self.claim, self.claim.record
        run = claim.run
        if self.observers.wants("invocation_ended"):
            from continuum._define.events import InvocationEnded

            self.observers.emit(
                "invocation_ended",
                InvocationEnded(
                    task_id=record.task_id,
                    task_name=record.task_name,
                    outcome=ended.value,
                    duration_s=claim.clock.elapsed_s(),
                    steps_executed=run.steps_executed if run else 0,
                    steps_replayed=run.steps_replayed if run else 0,
                    number=record.counters.invocations,
                    request_id=claim.lease.owner,
                    started_at=run.started_at.timestamp() if run else 0.0,
                    ended_at=now_s(),
                    first=record.counters.invocations == 1,
                ),
            )
        return ended

    def _turns(self, listing: Listing | None) -> TurnLoop:
        claim, task, context = self.claim, self.task, self.context
        assert task is not None
        record = claim.record
        settings = task.settings_under(self.settings)
        budget = Budget.of(lambda: remaining_s(context), settings, send_stats=record.send_stats)
        checked = record.inbox_checked_at or record.created_at.timestamp()
        loop = TurnLoop(
            task,
            record,
            budget,
            claim.save,
            settings,
            save_strict=claim.save_strict,
            inbox=TaskInbox(self.records.inbox, record.task_id, checked_at=checked),
            invocation=claim.run,
            observers=self.observers,
        )
        loop.children = self.children
        if self.observers.wants("operations_saved"):
            from continuum._worker.saved_operations import SavedOperations

            watch = SavedOperations(self.observers, claim)
            claim.saved, loop.turn_ending = watch.saved, watch.turn_ending
        if listing is not None:
            # A cancel request it cannot read now is read at the turn's next look (before
            # the turns, a Suspend would escape the handler).
            with contextlib.suppress(Suspend):
                loop.note_inbox(listing)
        return loop

    def _end(self, loop: TurnLoop, message_id: str) -> Outcome:
        """Run the turns, then end the hold the way they ended."""
        claim, endings, task = self.claim, self.endings, self.task
        assert task is not None
        record = claim.record
        outcome = loop.run()
        match outcome:
            case Lost():
                logger.info("another worker moved the record; stopping")
                return Outcome.FENCED
            case Failed(error):
                return endings.finish(claim, Status.FAILED, error)
            case Returned():
                return endings.finish(claim, Status.SUCCEEDED)
            case Cancelled(reason):
                text = f"the task was cancelled{f': {reason}' if reason else ''}"
                error = ErrorInfo(type="TaskCancelledError", message=text, turn=record.turn)
                return endings.finish(claim, Status.CANCELLED, error)
            case Waiting(waiters, reason):
                return endings.wait(claim, waiters, reason, message_id=message_id)
            case Suspended(reason, delay_s):
                if loop.progress or delay_s > 0:
                    record.idle_suspensions = 0
                else:
                    record.idle_suspensions += 1
                return endings.suspend(
                    claim,
                    reason,
                    delay_s=delay_s,
                    message_id=message_id,
                    limit=task.max_continuations,
                )
        raise AssertionError(f"unknown outcome {outcome!r}")  # pragma: no cover


def started_facts(claim: Claim) -> dict[str, Any]:
    """What an invocation's start tells beyond the message: its number and request id, when
    the task was created and this claim made, its trace context, and the invocation before
    it if that one died holding the task."""
    from continuum._define.events import CrashedInvocation

    record, run = claim.record, claim.run
    crashed = None
    history = record.history
    if len(history) >= 2 and history[-1] is run and history[-2].outcome == RunOutcome.CRASHED:
        dead = history[-2]
        started = dead.started_at.timestamp()
        seen = max((s.started + s.duration_s for s in dead.steps), default=started)
        crashed = CrashedInvocation(dead.number, dead.request_id, started, max(seen, started))
    return {
        "number": record.counters.invocations,
        "request_id": claim.lease.owner,
        "created_at": record.created_at.timestamp(),
        "started_at": run.started_at.timestamp() if run is not None else now_s(),
        "traceparent": record.traceparent,
        "parent_id": record.parent.task_id if record.parent is not None else None,
        "crashed": crashed,
        "retries": record.counters.retries,
        "first_started_at": next(
            (r.started_at.timestamp() for r in history[:1] if r.number == 1), 0.0
        ),
    }
