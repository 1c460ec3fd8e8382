"""What becomes of a step attempt that does not return its value.

It raised: the attempt is journaled, and with retries left the next one waits for its backoff
here, or in a fresh invocation when the wait will not fit (the journal keeps the attempts made
and when the next may start); else the step fails, journaled. It paused itself: its cursor is
journaled and the task suspends. It was preempted: the task suspends and it runs again. An
``at_most_once`` step found started (its worker died in it) is never run again: it fails, or
with retries left its next attempt is scheduled like a retry.
"""

from __future__ import annotations

import time
from typing import Any

from continuum._base.clock import now_s
from continuum._define.steps import Step
from continuum._record.model import ErrorInfo, JournalEntry, StepStats
from continuum._steps.budget import observe
from continuum._steps.signals import Suspend
from continuum._steps.turn_state import TurnState
from continuum.errors import StepError

#: Longest error message kept in the journal.
MAX_ERROR_CHARS = 2000


class Attempts(TurnState):
    """The endings of step attempts other than a value (``calls.StepCalls`` builds on it)."""

    def _raised(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        started: float,
        attempt: int,
        wall: float,
        exc: Exception,
    ) -> JournalEntry:
        """Attempt ``attempt`` raised ``exc``: schedule the next (its journal entry is returned,
        to be reopened when it starts), or fail the step."""
        options = step.options
        elapsed = self._timed(stats, started)
        error = ErrorInfo(
            type=type(exc).__name__,
            message=str(exc)[:MAX_ERROR_CHARS],
            step=key,
            turn=self.record.turn,
        )
        retrying = isinstance(exc, options.retry_on) and attempt <= options.retries
        outcome = "retry" if retrying else "failed"
        self.log_step(
            key, wall, elapsed, attempt, outcome, name=options.name, error_type=error.type
        )
        if not retrying:
            raise self._failed(step, key, attempt, elapsed, error) from exc
        return self._retry_later(step, key, stats, error, attempt, elapsed)

    def _interrupted(
        self, step: Step[Any, Any], key: str, stats: StepStats, marker: JournalEntry
    ) -> JournalEntry:
        """An at_most_once step was started and not recorded: its worker died in it. With
        retries left, schedule a new attempt (returned, to be reopened when it starts); else
        fail the step with StepInterruptedError."""
        self.journal.reopen()
        error = ErrorInfo(
            type="StepInterruptedError",
            message=(
                f"step {key!r} is at_most_once and its worker died while it ran (attempt "
                f"{marker.attempts}); it is not run again, as it may have done its work"
            ),
            step=key,
            turn=self.record.turn,
        )
        if marker.attempts > step.options.retries:
            raise self._failed(step, key, marker.attempts, 0.0, error)
        return self._retry_later(step, key, stats, error, marker.attempts, 0.0)

    def _retry_later(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        error: ErrorInfo,
        attempts: int,
        elapsed: float,
    ) -> JournalEntry:
        """Journal that attempt ``attempts`` failed and when the next may start (after the
        step's backoff, doubled per attempt), and wait for it."""
        retry = JournalEntry(
            key,
            step.name,
            ok=False,
            partial=True,
            error=error,
            attempts=attempts,
            duration_s=elapsed,
            retry_at=now_s() + step.options.backoff_s * 2 ** (attempts - 1),
        )
        self._append(retry)
        self._await_retry(key, stats, retry)
        return retry

    def _await_retry(self, key: str, stats: StepStats, entry: JournalEntry) -> None:
        """Wait for a retry's backoff here if it fits, else suspend for it (the journal keeps
        the attempts made and when the next may start)."""
        assert entry.retry_at is not None
        wait = entry.retry_at - now_s()
        if wait <= 0:
            return
        need = self.budget.need(stats, self.record.save_stats) + wait
        if self.budget.remaining() >= need:
            with self.unlocked():
                time.sleep(wait)
            return
        raise self.unwind(
            Suspend(
                f"step {key!r} waits {wait:.1f}s before attempt {entry.attempts + 1}", delay_s=wait
            )
        )

    def _paused(
        self,
        step: Step[Any, Any],
        key: str,
        stats: StepStats,
        started: float,
        attempt: int,
        wall: float,
        cursor: Any,
    ) -> Suspend:
        """The step paused itself at ``cursor``: journal it, and suspend (returned, to raise)."""
        elapsed = self._timed(stats, started)
        self._append(
            JournalEntry(
                key, step.name, attempts=attempt, duration_s=elapsed, partial=True, cursor=cursor
            )
        )
        self.log_step(key, wall, elapsed, attempt, "paused", name=step.name)
        return self.unwind(Suspend(f"step {key!r} paused itself; it continues"))

    def _preempted(self, key: str, stats: StepStats, started: float) -> None:
        elapsed = time.monotonic() - started
        # The step takes at least this long: remember it, but do not count a censored sample.
        stats.max_s = max(stats.max_s, elapsed)
        self.record.counters.preemptions += 1
        self.record.counters.preempted_s += elapsed
        raise self.unwind(
            Suspend(f"preempted step {key!r} after {elapsed:.2f}s; it runs again next time")
        )

    def _failed(
        self, step: Step[Any, Any], key: str, attempts: int, elapsed: float, error: ErrorInfo
    ) -> StepError:
        self._append(
            JournalEntry(
                key, step.name, ok=False, error=error, attempts=attempts, duration_s=elapsed
            )
        )
        self.record.counters.steps_executed += 1
        self.record.counters.step_failures += 1
        return self._step_error(error, key)

    def _step_error(self, error: ErrorInfo | None, key: str) -> StepError:
        error = error or ErrorInfo(type="StepError", message="the step failed")
        return StepError(
            error.message
            if error.type == "UnserializableValueError"
            else f"step raised {error.type}: {error.message}",
            error_type=error.type,
            task_id=self.record.task_id,
            step=key,
        )

    def _unmark(self, marker: JournalEntry | None) -> None:
        """Take back an at_most_once step's started-marker before recording its outcome."""
        if marker is not None and marker.started:
            self.journal.reopen()

    def _timed(self, stats: StepStats, started: float) -> float:
        elapsed = time.monotonic() - started
        observe(stats, elapsed)
        return round(elapsed, 6)

    def _append(self, entry: JournalEntry) -> None:
        self.journal.append(entry)
        self.progress = True
