"""The turn loop: run a task's turns inside one invocation, and say how it ended.

Each turn starts from the record's snapshot of the state (a fresh copy: the live state shares
nothing with it); the task function is called (an async one on the invocation's event loop:
``event_loop``); step calls replay from the journal until it runs out and then run live
(``_steps.step_calls``). When a step will not fit, :class:`Suspend`
unwinds the task function and the loop reports a suspension; the worker saves and continues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ValidationError

from continuum._base.json_values import dump_json, model_to_json, to_json
from continuum._define.settings import Settings
from continuum._record.inbox import Listing
from continuum._record.model import ErrorInfo, JournalEntry, TaskRecord
from continuum._record.waiting_for import Waiter
from continuum._steps.budget import Budget
from continuum._steps.control_flow import Abort, Fenced, Suspend, Wait
from continuum._steps.failures import error_info
from continuum._steps.turn_state import TurnScope, TurnState
from continuum._turn.context import TaskContext
from continuum._turn.context_runner import ContextRunner
from continuum._turn.tasks import Task
from continuum.errors import ContinuumError, InvalidInputError, describe_errors

if TYPE_CHECKING:
    from continuum._fanout.child_tasks import ChildTasks


class Returned(NamedTuple):
    """The task returned its result (kept in ``record.result``)."""


class Failed(NamedTuple):
    """The task failed: the step raised and the task did not catch it, or worse."""

    error: ErrorInfo


class Suspended(NamedTuple):
    """The task must continue in a fresh invocation, ``delay_s`` from now."""

    reason: str
    delay_s: float = 0.0


class Waiting(NamedTuple):
    """The task waits (for time, a callback, a signal) in no invocation at all."""

    waiters: list[Waiter]
    reason: str


class Cancelled(NamedTuple):
    """A cancel request ended the task (after any cleanup it ran)."""

    reason: str | None


class Lost(NamedTuple):
    """Another worker moved the record: stop, write nothing."""


TurnOutcome = Returned | Failed | Suspended | Waiting | Cancelled | Lost


class TurnLoop:
    """Runs one task's turns inside one invocation; the record is updated in memory.

    Args:
        task: the task definition.
        record: the claimed record; its snapshot, journal, stats and counters are updated.
        budget: the time rule of this invocation.
        save: saves the record now (compare-and-swap); called by the persistence policy.
            Raises ``Fenced`` when another worker moved the record.
        settings: the app's settings with the task's overrides (how often to save the
            journal, to list the inbox, how many deaths at one step fail the task).
        options: the rest of :meth:`TurnScope.start`'s arguments (``save_strict``, ``inbox``,
            ``preemptor``, ``invocation``, ``observers``).
    """

    def __init__(
        self,
        task: Task[Any],
        record: TaskRecord,
        budget: Budget,
        save: Callable[[], None],
        settings: Settings,
        **options: Any,
    ) -> None:
        self.task = task
        self.state = TurnState.start(TurnScope.start(record, budget, save, settings, **options))
        #: what the turn's TaskContext talks to: its step calls and waits.
        self.runner = ContextRunner(self.state)
        #: told a completed turn's journal before it is cleared (its effect is in the state).
        self.turn_ending: Callable[[list[JournalEntry]], None] | None = None

    @property
    def progress(self) -> bool:
        """Whether a step ran, a step failed, a wait was answered or a turn completed."""
        return self.state.progress

    @property
    def children(self) -> ChildTasks | None:
        """Starts child tasks (given by the worker)."""
        return self.runner.children

    @children.setter
    def children(self, children: ChildTasks | None) -> None:
        self.runner.children = children

    def note_inbox(self, listing: Listing | None = None) -> None:
        """Adopt the worker's listing of the inbox (or list it now)."""
        self.state.note_inbox(listing)

    def run(self) -> TurnOutcome:
        """Run turns until the task returns, fails, must suspend, or loses its record."""
        state = self.state
        while True:
            # A turn with no steps would otherwise never look at the clock.
            if state.progress and state.scope.budget.exhausted(state.scope.record.save_stats):
                return Suspended("no time left for another turn")
            outcome = self._turn()
            if outcome is not None:
                return outcome

    def _turn(self) -> TurnOutcome | None:
        """One turn: None when it completed and the next may start."""
        try:
            task_state = self._load_state()
        except InvalidInputError as exc:
            return self._turn_failed(exc)
        ended, result = self._call(task_state)
        if ended is not None:
            return ended
        return self._complete(task_state, result)

    def _call(self, task_state: BaseModel) -> tuple[TurnOutcome | None, Any]:
        """Call the task function on ``task_state``: (how the turn ended, None) or, when the
        function returned, (None, what it returned)."""
        state, runner = self.state, self.runner
        state.new_turn()
        runner.ctx = TaskContext(runner, task_state)
        try:
            if self.task.is_async:
                from continuum._turn.event_loop import run_async_turn

                result = run_async_turn(runner, self.task.fn)
            else:
                result = runner.run(self.task.fn, ())
        except Suspend as signal:
            return Suspended(signal.reason, signal.delay_s), None
        except Wait as wait:
            return Waiting(wait.waiters, wait.reason), None
        except Fenced:
            return Lost(), None
        except Abort as abort:
            return Failed(abort.error), None
        except Exception as exc:
            if self._cancel_delivered():
                return self._cancelled(), None
            return self._turn_failed(exc), None
        finally:
            runner.ctx = None
        if self._cancel_delivered():
            return self._cancelled(), None
        return None, result

    def _complete(self, task_state: BaseModel, result: Any) -> TurnOutcome | None:
        """The function returned: keep its result (the task returned), or its state and start
        the next turn (None)."""
        state, record = self.state, self.state.scope.record
        try:
            if result is not None:
                record.result = to_json(
                    self.task.result_adapter,
                    result,
                    what="the task's result",
                    task_id=record.task_id,
                )
                return Returned()
            record.state = model_to_json(task_state, what="the state", task_id=record.task_id)
        except ContinuumError as exc:
            return self._turn_failed(exc)
        if self.turn_ending is not None:
            self.turn_ending(record.journal)
        record.journal = []
        record.turn += 1
        record.counters.turns += 1
        state.progress = True
        if record.recovering:
            # In recovery every position is saved, so the next death names its step.
            try:
                state.scope.save()
            except Fenced:
                return Lost()
            except Abort as abort:
                return Failed(abort.error)
            state.last_save = state.scope.clock()
        return None

    def _cancel_delivered(self) -> bool:
        """Whether a cancel request ends this turn's task: once one is seen, it is raised at
        the next step or wait, and however the turn then ends (or if it reaches none), the
        task ends cancelled."""
        return self.state.scope.record.cancel is not None

    def _cancelled(self) -> Cancelled:
        cancel = self.state.scope.record.cancel
        return Cancelled(cancel.reason if cancel else None)

    def _load_state(self) -> BaseModel:
        """A fresh state model from the snapshot: the live state shares nothing with it."""
        model, record = self.task.state_model, self.state.scope.record
        try:
            state: BaseModel = model.model_validate_json(dump_json(record.state))
            return state
        except ValidationError as exc:
            raise InvalidInputError(
                f"saved state no longer validates against {model.__name__}: {describe_errors(exc)}",
                task_id=record.task_id,
                generation=record.generation,
                hint="migrate the state model, or bump the task version and restart the task",
            ) from exc

    def _turn_failed(self, exc: BaseException) -> Failed:
        return Failed(error_info(exc, self.state.scope.record.turn))
