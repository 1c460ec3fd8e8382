"""The turn loop: run a task's turns inside one invocation, and say how it ended.

Each turn starts from the record's snapshot of the state (a fresh copy: the live state shares
nothing with it); the task function is called; step calls replay from the journal until it
runs out and then run live (``calls.py``). When a step will not fit, :class:`Suspend` unwinds
the task function and the loop reports a suspension; the worker saves and continues.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from continuum._base.json_values import dump_json, model_to_json, to_json
from continuum._base.plain import Frozen
from continuum._define.steps import active_runner, running
from continuum._record.model import ErrorInfo, TaskRecord
from continuum._record.waiting_for import Waiter
from continuum._steps.budget import Budget
from continuum._steps.calls import StepCalls
from continuum._steps.signals import Abort, ControlFlow, Fenced, Suspend, Wait
from continuum._turn.context import TaskContext
from continuum._turn.tasks import Task
from continuum._waits.calls import WaitCalls
from continuum.errors import ContinuumError, InvalidInputError, StepError, describe_errors

# The outcomes are written by hand (``plain.py``): as frozen dataclasses, the six cost about 3
# ms of the worker's cold import.


class Returned(Frozen):
    """The task returned its result (kept in ``record.result``)."""

    __match_args__ = ()
    __slots__ = __match_args__


class Failed(Frozen):
    """The task failed: the step raised and the task did not catch it, or worse."""

    __match_args__ = ("error",)
    __slots__ = __match_args__
    error: ErrorInfo

    def __init__(self, error: ErrorInfo) -> None:
        object.__setattr__(self, "error", error)


class Suspended(Frozen):
    """The task must continue in a fresh invocation, ``delay_s`` from now."""

    __match_args__ = ("reason", "delay_s")
    __slots__ = __match_args__
    reason: str
    delay_s: float

    def __init__(self, reason: str, delay_s: float = 0.0) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "delay_s", delay_s)


class Waiting(Frozen):
    """The task waits (for time, a callback, a signal) in no invocation at all."""

    __match_args__ = ("waiters", "reason")
    __slots__ = __match_args__
    waiters: list[Waiter]
    reason: str

    def __init__(self, waiters: list[Waiter], reason: str) -> None:
        object.__setattr__(self, "waiters", waiters)
        object.__setattr__(self, "reason", reason)


class Cancelled(Frozen):
    """A cancel request ended the task (after any cleanup it ran)."""

    __match_args__ = ("reason",)
    __slots__ = __match_args__
    reason: str | None

    def __init__(self, reason: str | None) -> None:
        object.__setattr__(self, "reason", reason)


class Lost(Frozen):
    """Another worker moved the record: stop, write nothing."""

    __match_args__ = ()
    __slots__ = __match_args__


TurnOutcome = Returned | Failed | Suspended | Waiting | Cancelled | Lost


class TurnLoop(StepCalls, WaitCalls):
    """Runs one task's turns inside one invocation; the record is updated in memory.

    Args:
        task: the task definition.
        record: the claimed record; its snapshot, journal, stats and counters are updated.
        budget: the time rule of this invocation.
        save: saves the record now (compare-and-swap); called by the persistence policy.
            Raises ``Fenced`` when another worker moved the record.
        persist_every_s: save the journal at least this often while steps complete.
        max_step_crashes: worker deaths at one step after which the task fails.
        preemptor: runs a preemptible step with a time limit (default: SIGALRM).
    """

    def __init__(
        self,
        task: Task[Any],
        record: TaskRecord,
        budget: Budget,
        save: Callable[[], None],
        persist_every_s: float,
        **options: Any,
    ) -> None:
        super().__init__(record, budget, save, persist_every_s=persist_every_s, **options)
        self.task = task
        self.ctx: TaskContext[Any] | None = None

    def run(self) -> TurnOutcome:
        """Run turns until the task returns, fails, must suspend, or loses its record."""
        while True:
            if self.progress:
                # A turn with no steps would otherwise never look at the clock.
                save = self.budget.save_cost(self.record.save_stats) + self.budget.margin_s
                if self.budget.remaining() < save:
                    return Suspended("no time left for another turn")
            outcome = self._turn()
            if outcome is not None:
                return outcome

    def _turn(self) -> TurnOutcome | None:
        """One turn: None when it completed and the next may start."""
        record = self.record
        try:
            state = self._load_state()
        except InvalidInputError as exc:
            return self._turn_failed(exc)
        self.journal = type(self.journal)(record.journal, task_id=record.task_id, turn=record.turn)
        self.unwinding, self.refused = None, None
        self.ctx = TaskContext(self, state)
        token = active_runner.set(self)
        running[threading.get_ident()] = self
        try:
            try:
                out = self.task.fn(self.ctx)
            except Exception:
                self._check_unwinding()  # user code swallowed ours and raised its own
                raise
            self._check_unwinding()
            self.journal.check_complete()
        except Suspend as signal:
            return Suspended(signal.reason, signal.delay_s)
        except Wait as wait:
            return Waiting(wait.waiters, wait.reason)
        except Fenced:
            return Lost()
        except Abort as abort:
            return Failed(abort.error)
        except Exception as exc:
            if self._cancel_delivered():
                return Cancelled(record.cancel.reason if record.cancel else None)
            return self._turn_failed(exc)
        finally:
            active_runner.reset(token)
            running.pop(threading.get_ident(), None)
            self.ctx = None
        if self._cancel_delivered():
            return Cancelled(record.cancel.reason if record.cancel else None)
        try:
            if out is not None:
                record.result = to_json(
                    self.task.result_adapter, out, what="the task's result", task_id=record.task_id
                )
                return Returned()
            record.state = model_to_json(state, what="the state", task_id=record.task_id)
        except ContinuumError as exc:
            return self._turn_failed(exc)
        record.journal = []
        record.turn += 1
        record.counters.turns += 1
        self.progress = True
        if record.recovering:
            # In recovery every position is saved, so the next death names its step.
            try:
                self.save()
            except Fenced:
                return Lost()
            except Abort as abort:
                return Failed(abort.error)
            self.last_save = time.monotonic()
        return None

    def _cancel_delivered(self) -> bool:
        """Whether a cancel request ends this turn's task: once one is seen, it is raised at
        the next step or wait, and however the turn then ends (or if it reaches none), the
        task ends cancelled."""
        return self.record.cancel is not None

    def _check_unwinding(self) -> None:
        """After the task function returned (or raised something else): was a control-flow
        exception or a refused call swallowed by user code? Then re-raise or fail."""
        if isinstance(self.unwinding, Fenced | Abort):
            raise self.unwinding
        if isinstance(self.unwinding, ControlFlow):
            kind = type(self.unwinding).__name__
            raise Abort(
                ErrorInfo(
                    type="ControlFlowSwallowed",
                    message=(
                        f"the task caught continuum's {kind} exception (a bare `except:` or "
                        "`except BaseException:`), so its step was skipped and the turn "
                        "went on; continuing would save what that code did instead"
                    ),
                    turn=self.record.turn,
                )
            )
        if self.refused is not None:
            raise Abort(_error_info(self.refused, self.record.turn))

    def _load_state(self) -> BaseModel:
        """A fresh state model from the snapshot: the live state shares nothing with it."""
        model = self.task.state_model
        try:
            state: BaseModel = model.model_validate_json(dump_json(self.record.state))
            return state
        except ValidationError as exc:
            raise InvalidInputError(
                f"saved state no longer validates against {model.__name__}: {describe_errors(exc)}",
                task_id=self.record.task_id,
                generation=self.record.generation,
                hint="migrate the state model, or bump the task version and restart the task",
            ) from exc

    def _turn_failed(self, exc: BaseException) -> Failed:
        return Failed(_error_info(exc, self.record.turn))


def _error_info(exc: BaseException, turn: int) -> ErrorInfo:
    error_type = exc.error_type if isinstance(exc, StepError) else type(exc).__name__
    message = exc.message if isinstance(exc, ContinuumError) else str(exc)
    step = exc.step if isinstance(exc, ContinuumError) else None
    return ErrorInfo(type=error_type, message=message, step=step, turn=turn)
