"""Step calls inside a turn: replay from the journal, or run live under the budget.

For each call: take its key; if the journal recorded it, return the recorded outcome (the
same Python type a live call returns: both are rebuilt from the JSON); otherwise check the
budget, run the step (attempts and their waits are journaled, so retries count across
invocations), turn its result into JSON, journal it, and save by policy.
"""

from __future__ import annotations

import time
from typing import Any

from continuum.budget import observe
from continuum.control import Abort, Paused, Preempted, Suspend
from continuum.errors import StepError, UnserializableValueError
from continuum.now import now_s
from continuum.record import ErrorInfo, JournalEntry, StepStats
from continuum.recovery import mark_step
from continuum.steps import Step
from continuum.turnstate import TurnState
from continuum.values import from_json, to_json

#: Longest error message kept in the journal.
MAX_ERROR_CHARS = 2000


class StepCalls(TurnState):
    """The step-calling half of a turn loop (``waits.WaitCalls`` is the other half)."""

    # -- one call ----------------------------------------------------------------------------

    def call_step(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        if self.unwinding is not None:
            raise self.unwinding  # user code caught it: it still unwinds, and is noticed
        if self.active_key is not None:
            return step.run_nested(args, kwargs)
        with self.lock:  # the record is shared with the branches of a batch, if any
            self.replay_cancel()
            name = step.options.name
            key = self.journal.key_for(name, key)
            entry = self.journal.replay(name, key)
            if entry is not None and not entry.partial:
                self.record.counters.steps_replayed += 1
                if not entry.ok:
                    raise self._step_error(entry.error, key)
                return from_json(step.adapter, entry.result)
            self.halt_check()
            self.boundary(reopen=entry is not None)
            if self.step_wrapper is not None:
                step = self.step_wrapper(step, self)
            return self._run_live(step, key, args, kwargs, entry)

    def _run_live(
        self,
        step: Step[Any, Any],
        key: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        resume: JournalEntry | None,
    ) -> Any:
        record, options = self.record, step.options
        name = options.name
        stats = record.step_stats.get(name)
        if stats is None:
            stats = record.step_stats[name] = StepStats()
        attempt, cursor = 0, None
        # A step that is not done (paused, or between attempts) keeps its journal entry until
        # its next attempt starts, so a suspension before then loses neither.
        pending = resume
        if resume is not None and resume.started:
            # An at_most_once step whose worker died after it started: never run it again.
            pending = self._interrupted(step, key, stats, resume)
            attempt = resume.attempts
        elif resume is not None:
            if resume.retry_at is not None:
                attempt = resume.attempts
                self._await_retry(key, stats, resume)
            else:
                attempt, cursor = resume.attempts - 1, resume.cursor
        while True:
            self._check_budget(name, stats, preemptible=options.preemptible)
            if pending is not None:
                self.journal.reopen()
                pending = None
            if record.recovering:
                self._mark_start(key)
            attempt += 1
            if options.at_most_once:
                # Saved before the step runs: if its worker dies inside it, it is not rerun.
                pending = JournalEntry(key, name, attempts=attempt, partial=True, started=True)
                self._append(pending)
                self.save_strict()
            self.active_key = f"{record.task_id}/{record.turn}/{self.path}{key}"
            self.active_cursor = cursor
            self.step_started(key, name, attempt)
            wall, started = now_s(), time.monotonic()
            try:
                with self.unlocked():  # the step itself runs beside the other branches
                    if options.preemptible:
                        limit = self.budget.preempt_after(record.save_stats)
                        value = self.preemptor(lambda: step.fn(*args, **kwargs), limit)
                    else:
                        value = step.fn(*args, **kwargs)
            except Preempted:
                took = round(time.monotonic() - started, 6)
                self.log_step(key, wall, took, attempt, "preempted", name=name)
                self._preempted(key, stats, started)
            except Paused as pause:
                elapsed = self._timed(stats, started)
                self._unmark(pending)
                pending = None
                self._append(
                    JournalEntry(
                        key,
                        name,
                        attempts=attempt,
                        duration_s=elapsed,
                        partial=True,
                        cursor=pause.cursor,
                    )
                )
                self.log_step(key, wall, elapsed, attempt, "paused", name=name)
                raise self.unwind(Suspend(f"step {key!r} paused itself; it continues")) from None
            except Exception as exc:
                elapsed = self._timed(stats, started)
                self._unmark(pending)
                pending = None
                error = ErrorInfo(
                    type=type(exc).__name__,
                    message=str(exc)[:MAX_ERROR_CHARS],
                    step=key,
                    turn=record.turn,
                )
                retrying = isinstance(exc, options.retry_on) and attempt <= options.retries
                self.log_step(
                    key,
                    wall,
                    elapsed,
                    attempt,
                    "retry" if retrying else "failed",
                    name=name,
                    error_type=type(exc).__name__,
                )
                if retrying:
                    retry = JournalEntry(
                        key,
                        name,
                        ok=False,
                        partial=True,
                        error=error,
                        attempts=attempt,
                        duration_s=elapsed,
                        retry_at=now_s() + options.backoff_s * 2 ** (attempt - 1),
                    )
                    self._append(retry)
                    pending = retry
                    self._await_retry(key, stats, retry)
                    continue
                raise self._failed(step, key, attempt, elapsed, error) from exc
            finally:
                self.active_key = None
                self.active_cursor = None
                if record.running_step is not None:
                    record.running_step = None
            break
        elapsed = self._timed(stats, started)
        self._unmark(pending)
        adapter, typed = step.typing()
        try:
            result = to_json(
                adapter,
                value,
                what=f"the result of step {key!r}",
                task_id=record.task_id,
                typed=typed,
            )
        except UnserializableValueError as exc:
            error = ErrorInfo(
                type=type(exc).__name__, message=exc.message, step=key, turn=record.turn
            )
            raise self._failed(step, key, attempt, elapsed, error) from exc
        self._append(JournalEntry(key, name, result=result, duration_s=elapsed, attempts=attempt))
        self.log_step(key, wall, elapsed, attempt, "ok", name=name)
        record.counters.steps_executed += 1
        if options.effect or time.monotonic() - self.last_save >= self.persist_every_s:
            self.save()
            self.last_save = time.monotonic()
        return from_json(adapter, result)

    # -- work that is not a step (creating child tasks), under the same budget -------------------

    def check_work(self, name: str) -> None:
        """Suspend before a unit of framework work that will not fit, as before a step."""
        stats = self.record.step_stats.setdefault(name, StepStats())
        self._check_budget(name, stats, preemptible=False)

    def observe_work(self, name: str, seconds: float) -> None:
        observe(self.record.step_stats.setdefault(name, StepStats()), seconds)

    # -- pieces --------------------------------------------------------------------------------

    def _unmark(self, marker: JournalEntry | None) -> None:
        """Take back an at_most_once step's started-marker before recording its outcome."""
        if marker is not None and marker.started:
            self.journal.reopen()

    def _interrupted(
        self, step: Step[Any, Any], key: str, stats: StepStats, marker: JournalEntry
    ) -> JournalEntry:
        """An at_most_once step was started and not recorded: its worker died in it. With
        retries left, schedule a new attempt (returned, to be reopened when it starts); else
        fail the step with StepInterruptedError."""
        options = step.options
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
        if marker.attempts > options.retries:
            raise self._failed(step, key, marker.attempts, 0.0, error)
        retry = JournalEntry(
            key,
            step.name,
            ok=False,
            partial=True,
            error=error,
            attempts=marker.attempts,
            retry_at=now_s() + options.backoff_s * 2 ** (marker.attempts - 1),
        )
        self._append(retry)
        self._await_retry(key, stats, retry)
        return retry

    def _timed(self, stats: StepStats, started: float) -> float:
        elapsed = time.monotonic() - started
        observe(stats, elapsed)
        return round(elapsed, 6)

    def _append(self, entry: JournalEntry) -> None:
        self.journal.append(entry)
        self.progress = True

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

    def _check_budget(self, name: str, stats: StepStats, *, preemptible: bool) -> None:
        save_stats = self.record.save_stats
        reason = self.budget.refuse(name, stats, save_stats, preemptible=preemptible)
        if reason is None:
            return
        if self.progress:
            raise self.unwind(Suspend(reason))
        # Nothing done yet in this invocation. Suspend only if a fresh invocation would have
        # the time and the last one did not already suspend idle; otherwise suspending could
        # only loop, so run the step and let the deadline judge.
        fresh = self.record.invocation_budget_s
        need = self.budget.need(stats, save_stats, preemptible=preemptible)
        if self.record.idle_suspensions == 0 and need <= fresh:
            raise self.unwind(Suspend(f"{reason}; a fresh invocation has {fresh:.2f}s"))

    def _mark_start(self, key: str) -> None:
        """In recovery: save which step starts now, or fail if it keeps killing its worker."""
        error = mark_step(self.record, self.journal.position, key, self.max_step_crashes)
        if error is not None:
            raise self.unwind(Abort(error))
        self.save()

    def _preempted(self, key: str, stats: StepStats, started: float) -> None:
        elapsed = time.monotonic() - started
        # The step takes at least this long: remember it, but do not count a censored sample.
        stats.max_s = max(stats.max_s, elapsed)
        self.record.counters.preemptions += 1
        self.record.counters.preempted_s += elapsed
        raise self.unwind(
            Suspend(f"preempted step {key!r} after {elapsed:.2f}s; it runs again next time")
        )
