"""Step calls inside a turn: replay from the journal, or run live under the budget.

For each call: take its key; if the journal recorded it, return the recorded outcome (the
same Python type a live call returns: both are rebuilt from the JSON); otherwise check the
budget, run the step (attempts and their waits are journaled, so retries count across
invocations), turn its result into JSON, journal it, and save by policy.
"""

from __future__ import annotations

import time
from typing import Any

from continuum._base.clock import now_s
from continuum._base.json_values import from_json, own_json, to_json
from continuum._define.steps import Step
from continuum._record.model import ErrorInfo, JournalEntry, StepStats
from continuum._record.recovery import mark_step
from continuum._steps.attempts import Attempts
from continuum._steps.budget import observe
from continuum._steps.signals import Abort, Paused, Preempted, Suspend
from continuum.errors import UnserializableValueError


class StepCalls(Attempts):
    """The step-calling half of a turn loop (``waits.WaitCalls`` is the other half); what
    becomes of an attempt that does not return is in ``attempts.py``."""

    # -- one call ----------------------------------------------------------------------------

    def call_step(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        if self.unwinding is not None:
            raise self.unwinding  # user code caught it: it still unwinds, and is noticed
        if self.active_key is not None:
            return step.run_nested(args, kwargs)
        with self.lock:  # the record is shared with the branches of a batch, if any
            journal = self.journal
            replaying = journal.position < len(journal.entries)
            if replaying:
                self.replay_cancel()
            name = step.options.name
            key = journal.key_for(name, key)
            entry = journal.replay(name, key) if replaying else None
            if entry is not None and not entry.partial:
                self.record.counters.steps_replayed += 1
                if not entry.ok:
                    raise self._step_error(entry.error, key)
                return from_json(step.adapter, entry.result)
            if self.halt is not None:
                self.halt_check()
            # boundary()'s own test, inline: on every step's path, its call showed (~4 %).
            wall = now_s()
            if wall - self.inbox.listed_at >= self.inbox_poll_s or self.record.cancel is not None:
                wall = self.boundary(reopen=entry is not None)
            if self.step_wrapper is not None:
                step = self.step_wrapper(step, self)
            return self._run_live(step, key, args, kwargs, entry, wall)

    def _run_live(
        self,
        step: Step[Any, Any],
        key: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        resume: JournalEntry | None,
        wall: float,
    ) -> Any:
        """Run the step's attempts; ``wall``: now, as the boundary before it read the clock."""
        record, options, lock = self.record, step.options, self.lock
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
        if resume is not None:
            wall = now_s()  # after any backoff slept above
        while True:
            self._check_budget(name, stats, preemptible=options.preemptible)
            if pending is not None:
                self.journal.reopen()
                pending = None
            if record.recovering:
                self._mark_start(key)
                wall = now_s()
            attempt += 1
            if options.at_most_once:
                # Saved before the step runs: if its worker dies inside it, it is not rerun.
                pending = JournalEntry(key, name, attempts=attempt, partial=True, started=True)
                self._append(pending)
                self.save_strict()
                wall = now_s()
            self.active_key = f"{record.task_id}/{record.turn}/{self.path}{key}"
            self.active_cursor = cursor
            if self.observers is not None:
                self.step_started(key, name, attempt)
            started = time.monotonic()
            try:
                lock.release()  # the step itself runs beside the other branches
                try:
                    if options.preemptible:
                        limit = self.budget.preempt_after(record.save_stats)
                        value = self.preemptor(lambda: step.fn(*args, **kwargs), limit)
                    else:
                        value = step.fn(*args, **kwargs)
                finally:
                    lock.acquire()
            except Preempted:
                took = round(time.monotonic() - started, 6)
                self.log_step(key, wall, took, attempt, "preempted", name=name)
                self._preempted(key, stats, started)
            except Paused as pause:
                self._unmark(pending)
                raise self._paused(step, key, stats, started, attempt, wall, pause.cursor) from None
            except Exception as exc:
                self._unmark(pending)
                pending = self._raised(step, key, stats, started, attempt, wall, exc)
                wall = now_s()  # the backoff is over: the next attempt starts now
                continue
            finally:
                self.active_key = None
                self.active_cursor = None
                if record.running_step is not None:
                    record.running_step = None
            break
        # _timed() and, below, _append(), inline: through the two calls a step cost ~4 % more
        # (benchmarks.versus' step, measured twice side by side).
        elapsed = time.monotonic() - started
        observe(stats, elapsed)
        elapsed = round(elapsed, 6)
        if pending is not None:
            self._unmark(pending)
        adapter, typed = step._adapter or step.typing()
        # A scalar that the adapter takes and writes as it is (an int of a step declared
        # `-> int`) is its own JSON and its own rebuild: it is recorded and returned as it is.
        rebuild = type(value) not in own_json(adapter)
        result = value
        if rebuild:
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
        # key, name, ok, result, result_ref, error, duration_s, attempts: positional, as
        # keywords cost a tenth of a microsecond more on every step.
        self.journal.append(JournalEntry(key, name, True, result, None, None, elapsed, attempt))
        self.progress = True
        if self.invocation is not None or self.observers is not None:
            self.log_step(key, wall, elapsed, attempt, "ok", name=name)
        record.counters.steps_executed += 1
        if options.effect or time.monotonic() - self.last_save >= self.persist_every_s:
            self.save()
            self.last_save = time.monotonic()
        return from_json(adapter, result) if rebuild else value

    # -- work that is not a step (creating child tasks), under the same budget -------------------

    def check_work(self, name: str) -> None:
        """Suspend before a unit of framework work that will not fit, as before a step."""
        stats = self.record.step_stats.setdefault(name, StepStats())
        self._check_budget(name, stats, preemptible=False)

    def observe_work(self, name: str, seconds: float) -> None:
        observe(self.record.step_stats.setdefault(name, StepStats()), seconds)

    # -- pieces --------------------------------------------------------------------------------

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
