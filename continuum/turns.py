"""TaskContext and the turn loop: steps, replay, and the decision to suspend.

One :class:`TurnLoop` runs one task inside one invocation. Each turn starts from the record's
snapshot of the state; the task function is called; step calls replay from the journal until
it runs out and then run live, each checked against the budget first. When a step will not fit,
:class:`Suspend` (a ``BaseException``, so a user's ``except Exception`` cannot swallow it)
unwinds the task function and the loop reports a suspension; the worker saves and continues.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from continuum.budget import Budget, observe
from continuum.errors import ContinuumError, InvalidInputError, StepError
from continuum.journal import Journal
from continuum.record import ErrorInfo, JournalEntry, StepStats, TaskRecord, describe_errors
from continuum.steps import Step, active_runner, as_step

if TYPE_CHECKING:
    from continuum.app import Task

S = TypeVar("S", bound=BaseModel)


class Suspend(BaseException):
    """Unwinds a task function so the worker can save and continue elsewhere."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Fenced(BaseException):
    """Another worker moved the record: this one stops at once and writes nothing more."""


class TaskContext(Generic[S]):
    """What a task function sees on each turn.

    Attributes:
        state: the task's state; changes to it are kept when the turn completes.
        task_id: the task's id.
        turn: the number of this turn, from 0.

    Example:
        >>> @app.task(state=Research)  # doctest: +SKIP
        ... def research(ctx: TaskContext[Research]) -> str | None:
        ...     ctx.state.notes.append(search(ctx.state.topic))
        ...     return None if len(ctx.state.notes) < 3 else "done"
    """

    def __init__(self, loop: TurnLoop, state: S) -> None:
        self._loop = loop
        self.state = state

    @property
    def task_id(self) -> str:
        return self._loop.record.task_id

    @property
    def turn(self) -> int:
        return self._loop.record.turn

    def step(
        self, fn: Callable[..., Any], *args: Any, key: str | None = None, **kwargs: Any
    ) -> Any:
        """Call ``fn`` as a step: journaled, timed, and replayed on re-entry.

        ``key`` names the call in the journal; by default it is the step's name and its
        ordinal within the turn.
        """
        return self._loop.call_step(as_step(fn), args, kwargs, key)

    def remaining(self) -> float:
        """Seconds left in this invocation."""
        return self._loop.budget.remaining()

    @property
    def idempotency_key(self) -> str:
        """A key for the step running now, stable across its retries and re-executions.

        Pass it to an external system so that it can deduplicate a step that ran twice
        because a worker died before the journal recorded it.
        """
        if self._loop.active_key is None:
            raise ContinuumError(
                "idempotency_key is only available while a step runs", task_id=self.task_id
            )
        return self._loop.active_key


@dataclass
class Outcome:
    """How a turn loop ended: ``finished``, ``failed``, ``suspended`` or ``fenced``."""

    kind: str
    reason: str | None = None
    error: ErrorInfo | None = None


class TurnLoop:
    """Runs one task's turns inside one invocation; the record is updated in memory.

    Args:
        task: the task definition.
        record: the claimed record; its snapshot, journal, stats and counters are updated.
        budget: the time rule of this invocation.
        persist: saves the record now (compare-and-swap); called by the persistence policy.
        persist_every_s: save the journal at least this often while steps complete.
    """

    def __init__(
        self,
        task: Task[Any],
        record: TaskRecord,
        budget: Budget,
        persist: Callable[[], None],
        persist_every_s: float,
    ) -> None:
        self.task = task
        self.record = record
        self.budget = budget
        self.persist = persist
        self.persist_every_s = persist_every_s
        self.active_key: str | None = None
        self.progress = False
        self.last_persist = time.monotonic()
        self.journal = Journal(record.journal, task_id=record.task_id, turn=record.turn)

    # -- turns -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        while True:
            if self.progress:
                # A turn with no steps would otherwise never look at the clock.
                save = self.budget.save_cost(self.record.save_stats) + self.budget.margin_s
                if self.budget.remaining() < save:
                    return Outcome("suspended", reason="no time left for another turn")
            try:
                state = self._load_state()
            except InvalidInputError as exc:
                return self._failed(exc, step=None)
            self.journal = Journal(
                self.record.journal, task_id=self.record.task_id, turn=self.record.turn
            )
            ctx: TaskContext[Any] = TaskContext(self, state)
            token = active_runner.set(self)
            try:
                out = self.task.fn(ctx)
                self.journal.check_complete()
            except Suspend as signal:
                return Outcome("suspended", reason=signal.reason)
            except Fenced:
                return Outcome("fenced")
            except Exception as exc:
                return self._failed(exc, step=exc.step if isinstance(exc, ContinuumError) else None)
            finally:
                active_runner.reset(token)
            if out is not None:
                try:
                    self.record.result = self.task.result_adapter.dump_python(out, mode="json")
                except Exception as exc:
                    return self._failed(
                        ContinuumError(f"task result is not JSON-serialisable: {exc}"), step=None
                    )
                return Outcome("finished")
            self.record.state = state.model_dump(mode="json")
            self.record.journal = []
            self.record.turn += 1
            self.record.counters.turns += 1
            self.progress = True

    def _load_state(self) -> BaseModel:
        try:
            state: BaseModel = self.task.state_model.model_validate(self.record.state)
            return state
        except ValidationError as exc:
            raise InvalidInputError(
                f"saved state no longer validates against {self.task.state_model.__name__}: "
                f"{describe_errors(exc)}",
                task_id=self.record.task_id,
                generation=self.record.generation,
                hint="migrate the state model, or bump the task version and restart the task",
            ) from exc

    def _failed(self, exc: BaseException, *, step: str | None) -> Outcome:
        error_type = exc.error_type if isinstance(exc, StepError) else type(exc).__name__
        message = exc.message if isinstance(exc, ContinuumError) else str(exc)
        return Outcome(
            "failed",
            error=ErrorInfo(type=error_type, message=message, step=step, turn=self.record.turn),
        )

    # -- steps -------------------------------------------------------------------------------

    def call_step(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        if self.active_key is not None:
            # A step called from inside a step is part of the outer step's work.
            return step.fn(*args, **kwargs)
        name = step.name
        key = self.journal.key_for(name, key)
        entry = self.journal.replay(name, key)
        if entry is not None:
            self.record.counters.steps_replayed += 1
            if not entry.ok:
                assert entry.error is not None
                raise StepError(
                    entry.error.message,
                    error_type=entry.error.type,
                    task_id=self.record.task_id,
                    step=key,
                )
            return step.adapter.validate_python(entry.result)
        return self._run_live(step, key, args, kwargs)

    def _run_live(
        self, step: Step[Any, Any], key: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        record = self.record
        stats = record.step_stats.get(step.name)
        if stats is None:
            stats = record.step_stats[step.name] = StepStats()
        options = step.options
        attempt = 0
        while True:
            self._check_budget(step.name, stats)
            attempt += 1
            self.active_key = f"{record.task_id}/{record.turn}/{key}"
            started = time.monotonic()
            try:
                value = step.fn(*args, **kwargs)
            except Exception as exc:
                if isinstance(exc, options.retry_on) and attempt <= options.retries:
                    observe(stats, time.monotonic() - started)
                    time.sleep(options.backoff_s * 2 ** (attempt - 1))
                    continue
                self._record_failure(step, key, stats, started, attempt, exc)
                raise StepError(
                    f"step raised {type(exc).__name__}: {exc}",
                    error_type=type(exc).__name__,
                    task_id=record.task_id,
                    step=key,
                ) from exc
            finally:
                self.active_key = None
            break
        duration = time.monotonic() - started
        observe(stats, duration)
        try:
            result = step.adapter.dump_python(value, mode="json")
        except Exception as exc:
            raise StepError(
                f"step result is not JSON-serialisable: {exc}",
                error_type=type(exc).__name__,
                task_id=record.task_id,
                step=key,
            ) from exc
        self.journal.record(
            JournalEntry(
                key=key,
                name=step.name,
                result=result,
                duration_s=round(duration, 6),
                attempts=attempt,
            )
        )
        record.counters.steps_executed += 1
        self.progress = True
        now = time.monotonic()
        if options.effect or now - self.last_persist >= self.persist_every_s:
            self.persist()
            self.last_persist = time.monotonic()
        return value

    def _check_budget(self, name: str, stats: StepStats) -> None:
        reason = self.budget.refuse(name, stats, self.record.save_stats)
        if reason is None:
            return
        if self.progress:
            raise Suspend(reason)
        # Nothing done yet in this invocation. Suspend only if a fresh invocation would have
        # the time and the last one did not already suspend idle; otherwise suspending could
        # only loop, so run the step and let the deadline judge.
        fresh = self.record.invocation_budget_s
        if (
            self.record.idle_suspensions == 0
            and self.budget.need(stats, self.record.save_stats) <= fresh
        ):
            raise Suspend(f"{reason}; a fresh invocation has {fresh:.2f}s")

    def _record_failure(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        started: float,
        attempts: int,
        exc: BaseException,
    ) -> None:
        duration = time.monotonic() - started
        observe(stats, duration)
        error = ErrorInfo(
            type=type(exc).__name__, message=str(exc)[:2000], step=key, turn=self.record.turn
        )
        self.journal.record(
            JournalEntry(
                key=key,
                name=step.name,
                ok=False,
                error=error,
                duration_s=round(duration, 6),
                attempts=attempts,
            )
        )
        self.record.counters.steps_executed += 1
        self.record.counters.step_failures += 1
        self.progress = True
