"""TaskContext and the turn loop: steps, replay, and the decision to suspend.

One :class:`TurnLoop` runs one task inside one invocation. Each turn starts from the record's
snapshot of the state; the task function is called; step calls replay from the journal until
it runs out and then run live, each checked against the budget first. When a step will not fit,
:class:`Suspend` unwinds the task function and the loop reports a suspension; the worker saves
and continues. Signals are ``BaseException``s (see ``signals.py``) so user code cannot swallow
them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from continuum.budget import Budget, Preemptor, alarm_preemptor, observe
from continuum.context import TaskContext
from continuum.errors import ContinuumError, InvalidInputError, StepError
from continuum.journal import Journal
from continuum.record import ErrorInfo, JournalEntry, StepStats, TaskRecord, describe_errors
from continuum.signals import Abort, Fenced, Paused, Preempted, Suspend
from continuum.steps import Step, active_runner

if TYPE_CHECKING:
    from continuum.app import Task

#: Consecutive worker deaths at one step after which the task fails instead of trying again.
DEFAULT_MAX_STEP_CRASHES = 3


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
        max_step_crashes: worker deaths at one step after which the task fails.
        preemptor: runs a preemptible step with a time limit (default: SIGALRM).
    """

    def __init__(
        self,
        task: Task[Any],
        record: TaskRecord,
        budget: Budget,
        persist: Callable[[], None],
        persist_every_s: float,
        *,
        max_step_crashes: int = DEFAULT_MAX_STEP_CRASHES,
        preemptor: Preemptor = alarm_preemptor,
    ) -> None:
        self.task = task
        self.record = record
        self.budget = budget
        self.persist = persist
        # After a worker died, save after every step so the next death names its step.
        self.persist_every_s = 0.0 if record.careful else persist_every_s
        self.max_step_crashes = max_step_crashes
        self.preemptor = preemptor
        self.active_key: str | None = None
        self.active_cursor: Any = None
        self.ctx: TaskContext[Any] | None = None
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
            record = self.record
            self.journal = Journal(record.journal, task_id=record.task_id, turn=record.turn)
            self.ctx = TaskContext(self, state)
            token = active_runner.set(self)
            try:
                out = self.task.fn(self.ctx)
                self.journal.check_complete()
            except Suspend as signal:
                return Outcome("suspended", reason=signal.reason)
            except Fenced:
                return Outcome("fenced")
            except Abort as abort:
                return Outcome("failed", error=abort.error)
            except Exception as exc:
                return self._failed(exc, step=exc.step if isinstance(exc, ContinuumError) else None)
            finally:
                active_runner.reset(token)
                self.ctx = None
            if out is not None:
                try:
                    record.result = self.task.result_adapter.dump_python(out, mode="json")
                except Exception as exc:
                    error = ContinuumError(f"task result is not JSON-serialisable: {exc}")
                    return self._failed(error, step=None)
                return Outcome("finished")
            record.state = state.model_dump(mode="json")
            record.journal = []
            record.turn += 1
            record.counters.turns += 1
            self.progress = True
            if record.careful:
                # After a death, every position is saved so the next death names its step.
                try:
                    self.persist()
                except Fenced:
                    return Outcome("fenced")
                except Abort as abort:
                    return Outcome("failed", error=abort.error)
                self.last_persist = time.monotonic()

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
        cursor = None
        if entry is not None:
            if entry.partial:
                # A cooperative step paused here: run it again from its cursor.
                self.journal.entries.pop()
                self.journal.position -= 1
                cursor = entry.cursor
            else:
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
        return self._run_live(step, key, args, kwargs, cursor)

    def _run_live(
        self,
        step: Step[Any, Any],
        key: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        cursor: Any,
    ) -> Any:
        record = self.record
        options = step.options
        name = options.name
        stats = record.step_stats.get(name)
        if stats is None:
            stats = record.step_stats[name] = StepStats()
        attempt = 0
        while True:
            self._check_budget(name, stats, preemptible=options.preemptible)
            if record.careful:
                self._mark_start(key)
            attempt += 1
            self.active_key = f"{record.task_id}/{record.turn}/{key}"
            self.active_cursor = cursor
            started = time.monotonic()
            try:
                if options.preemptible:
                    limit = self.budget.preempt_after(record.save_stats)
                    value = self.preemptor(lambda: step.fn(*args, **kwargs), limit)
                else:
                    value = step.fn(*args, **kwargs)
            except Preempted:
                self._preempted(step, key, stats, started)
            except Paused as pause:
                self._paused(step, key, stats, started, attempt, pause.cursor)
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
                self.active_cursor = None
                record.running_step = None
            break
        finished = time.monotonic()
        duration = finished - started
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
                name=name,
                result=result,
                duration_s=round(duration, 6),
                attempts=attempt,
            )
        )
        record.counters.steps_executed += 1
        self.progress = True
        if options.effect or finished - self.last_persist >= self.persist_every_s:
            self.persist()
            self.last_persist = time.monotonic()
        return value

    def _check_budget(self, name: str, stats: StepStats, *, preemptible: bool) -> None:
        save_stats = self.record.save_stats
        reason = self.budget.refuse(name, stats, save_stats, preemptible=preemptible)
        if reason is None:
            return
        if self.progress:
            raise Suspend(reason)
        # Nothing done yet in this invocation. Suspend only if a fresh invocation would have
        # the time and the last one did not already suspend idle; otherwise suspending could
        # only loop, so run the step and let the deadline judge.
        fresh = self.record.invocation_budget_s
        need = self.budget.need(stats, save_stats, preemptible=preemptible)
        if self.record.idle_suspensions == 0 and need <= fresh:
            raise Suspend(f"{reason}; a fresh invocation has {fresh:.2f}s")

    def _mark_start(self, key: str) -> None:
        """Careful mode: save which step starts now, or fail if it keeps killing its worker."""
        record = self.record
        here = f"{record.turn}:{self.journal.position}:{key}"
        if record.crashes >= self.max_step_crashes and record.crash_at == here:
            raise Abort(
                ErrorInfo(
                    type="StepCrashedWorker",
                    message=(
                        f"step {key!r} was running each of the last {record.crashes} times its "
                        "worker died (killed, out of memory, or past the invocation deadline); "
                        "failing the task rather than trying again"
                    ),
                    step=key,
                    turn=record.turn,
                )
            )
        record.running_step = here
        self.persist()

    def _preempted(self, step: Step[Any, Any], key: str, stats: StepStats, started: float) -> None:
        elapsed = time.monotonic() - started
        # The step takes at least this long: remember it, but do not count a censored sample.
        stats.max_s = max(stats.max_s, elapsed)
        self.record.counters.preemptions += 1
        self.record.counters.preempted_s += elapsed
        raise Suspend(f"preempted step {key!r} after {elapsed:.2f}s; it runs again next time")

    def _paused(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        started: float,
        attempt: int,
        cursor: Any,
    ) -> None:
        self._journal_outcome(step, key, stats, started, attempt, partial=True, cursor=cursor)
        raise Suspend(f"step {key!r} paused itself; it continues from its cursor")

    def _record_failure(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        started: float,
        attempts: int,
        exc: BaseException,
    ) -> None:
        error = ErrorInfo(
            type=type(exc).__name__, message=str(exc)[:2000], step=key, turn=self.record.turn
        )
        self._journal_outcome(step, key, stats, started, attempts, ok=False, error=error)
        self.record.counters.steps_executed += 1
        self.record.counters.step_failures += 1

    def _journal_outcome(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        started: float,
        attempts: int,
        **outcome: Any,
    ) -> None:
        """Time a step that ended without a result (failed or paused) and journal it."""
        duration = time.monotonic() - started
        observe(stats, duration)
        self.journal.record(
            JournalEntry(
                key=key,
                name=step.name,
                duration_s=round(duration, 6),
                attempts=attempts,
                **outcome,
            )
        )
        self.progress = True
