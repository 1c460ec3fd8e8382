"""What becomes of a step attempt that does not return its value.

It raised: the attempt is journaled, and with retries left the next one waits for its backoff
(``retry_wait``: in this invocation, or, when the wait will not fit, the task waits for it as a
sleep does: the journal keeps the attempts made and when the next may start); else the step
fails, journaled. It paused
itself: its cursor is journaled and the task suspends. It was preempted: the task suspends and
it runs again. An ``at_most_once`` step found started (its worker died in it) is never run
again: it fails, or with retries left its next attempt is scheduled like a retry.
"""

from __future__ import annotations

from typing import Any

from continuum._base.clock import now_s
from continuum._base.tracebacks import bounded_traceback
from continuum._define.steps import Step
from continuum._record.model import ErrorInfo, JournalEntry, StepStats
from continuum._record.waiting_for import Waiter, WaitKind, epoch_to_datetime
from continuum._steps.budget import observe
from continuum._steps.control_flow import Suspend, Wait
from continuum._steps.turn_state import TurnState
from continuum.errors import StepError

#: Longest error message kept in the journal.
MAX_ERROR_CHARS = 2000


def raised(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    stats: StepStats,
    started: float,
    attempt: int,
    wall: float,
    exc: Exception,
    *,
    since: float | None = None,
) -> JournalEntry:
    """Attempt ``attempt`` raised ``exc``: schedule the next (its journal entry is returned,
    to be reopened when it starts), or fail the step. ``since``: when its first attempt
    started."""
    options = step.options
    elapsed = timed(state, stats, started)
    error = ErrorInfo(
        type=type(exc).__name__,
        message=str(exc)[:MAX_ERROR_CHARS],
        step=key,
        turn=state.scope.record.turn,
        traceback=bounded_traceback(exc),
    )
    retrying = isinstance(exc, options.retry_on) and attempt <= options.retries
    outcome = "retry" if retrying else "failed"
    state.log_step(
        key,
        wall,
        elapsed,
        attempt,
        outcome,
        name=options.name,
        error_type=error.type,
        error=error.message,
    )
    if not retrying:
        raise failed(state, step, key, attempt, elapsed, error, since) from exc
    return retry_later(state, step, key, error, attempt, elapsed, since=since)


def interrupted(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    marker: JournalEntry,
) -> JournalEntry:
    """An at_most_once step was started and not recorded: its worker died in it. With
    retries left, schedule a new attempt (returned, to be reopened when it starts); else
    fail the step with StepInterruptedError."""
    state.journal.reopen()
    error = ErrorInfo(
        type="StepInterruptedError",
        message=(
            f"step {key!r} is at_most_once and its worker died while it ran (attempt "
            f"{marker.attempts}); it is not run again, as it may have done its work"
        ),
        step=key,
        turn=state.scope.record.turn,
    )
    if marker.attempts > step.options.retries:
        raise failed(state, step, key, marker.attempts, 0.0, error)
    return retry_later(state, step, key, error, marker.attempts, 0.0, since=marker.since)


def retry_later(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    error: ErrorInfo,
    attempts: int,
    elapsed: float,
    *,
    since: float | None = None,
) -> JournalEntry:
    """Journal that attempt ``attempts`` failed and when the next may start (after the
    step's backoff, doubled per attempt). ``since``: when its first attempt started."""
    retry = JournalEntry(
        key,
        step.name,
        ok=False,
        partial=True,
        error=error,
        attempts=attempts,
        duration_s=elapsed,
        retry_at=now_s() + step.options.backoff_s * 2 ** (attempts - 1),
        since=since,
    )
    state.append(retry)
    return retry


def retry_wait(state: TurnState, key: str, stats: StepStats, entry: JournalEntry) -> float:
    """The seconds to wait here for a retry's backoff (0: none), or raise ``Wait`` when the
    wait will not fit in this invocation: the task waits for the next attempt's time as a
    sleep does (one schedule, or timer hops that claim nothing), and its wake runs it."""
    assert entry.retry_at is not None
    wait = entry.retry_at - now_s()
    if wait <= 0:
        return 0.0
    if state.scope.budget.fits_after(wait, stats, state.scope.record.save_stats):
        return wait
    deadline = epoch_to_datetime(entry.retry_at)
    waiter = Waiter(kind=WaitKind.TIME, name=f"{state.path}{key}.retry", deadline=deadline)
    raise state.unwind(
        Wait([waiter], f"step {key!r} waits {wait:.1f}s before attempt {entry.attempts + 1}")
    )


def paused(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    stats: StepStats,
    started: float,
    attempt: int,
    wall: float,
    cursor: Any,
    *,
    since: float | None = None,
) -> Suspend:
    """The step paused itself at ``cursor``: journal it, and suspend (returned, to raise).
    ``since``: when its first attempt started."""
    elapsed = timed(state, stats, started)
    state.append(
        JournalEntry(
            key,
            step.name,
            attempts=attempt,
            duration_s=elapsed,
            partial=True,
            cursor=cursor,
            since=since,
        )
    )
    state.log_step(key, wall, elapsed, attempt, "paused", name=step.name)
    return state.unwind(Suspend(f"step {key!r} paused itself; it continues"))


def preempted(state: TurnState, key: str, stats: StepStats, started: float) -> Suspend:
    """The step was preempted: count it, and suspend (returned, to raise)."""
    elapsed = state.scope.clock() - started
    # The step takes at least this long: remember it, but do not count a censored sample.
    stats.max_s = max(stats.max_s, elapsed)
    state.scope.record.counters.preemptions += 1
    state.scope.record.counters.preempted_s += elapsed
    return state.unwind(
        Suspend(f"preempted step {key!r} after {elapsed:.2f}s; it runs again next time")
    )


def failed(
    state: TurnState,
    step: Step[Any, Any],
    key: str,
    attempts: int,
    elapsed: float,
    error: ErrorInfo,
    since: float | None = None,
) -> StepError:
    """Journal that the step failed; the error to raise where it was called. ``since``: when
    its first attempt started (kept for an observer of the record)."""
    entry = JournalEntry(key, step.name, ok=False, error=error, attempts=attempts)
    entry.duration_s = elapsed
    if state.scope.observers is not None:
        entry.since = since
    state.append(entry)
    state.scope.record.counters.steps_executed += 1
    state.scope.record.counters.step_failures += 1
    return step_error(state, error, key)


def step_error(state: TurnState, error: ErrorInfo | None, key: str) -> StepError:
    """The error a failed step raises where it was called (live or on replay)."""
    error = error or ErrorInfo(type="StepError", message="the step failed")
    return StepError(
        error.message
        if error.type == "UnserializableValueError"
        else f"step raised {error.type}: {error.message}",
        error_type=error.type,
        step_traceback=error.traceback,
        task_id=state.scope.record.task_id,
        step=key,
    )


def unmark(state: TurnState, marker: JournalEntry | None) -> None:
    """Take back an at_most_once step's started-marker before recording its outcome."""
    if marker is not None and marker.started:
        state.journal.reopen()


def timed(state: TurnState, stats: StepStats, started: float) -> float:
    """The attempt's duration since ``started`` on the turn's clock, noted in the step's
    statistics."""
    elapsed = state.scope.clock() - started
    observe(stats, elapsed)
    return round(elapsed, 6)
