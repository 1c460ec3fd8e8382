"""Step calls inside a turn: replay from the journal, or run live under the budget.

For each call: take its key; if the journal recorded it, return the recorded outcome (the
same Python type a live call returns: both are rebuilt from the JSON); otherwise resume what
the journal kept of it (a paused step's cursor, a retry's backoff), run its attempts under the
budget (attempts and their waits are journaled, so retries count across invocations), and
record its value as JSON, saving by policy. What becomes of an attempt that does not return is
in ``attempt_endings.py``.
"""

from __future__ import annotations

import inspect
from typing import Any

from continuum._base.clock import now_s
from continuum._base.json_values import from_json, own_json, to_json
from continuum._define.steps import Step
from continuum._record.model import ErrorInfo, JournalEntry, StepStats
from continuum._record.recovery import mark_step
from continuum._steps.attempt_endings import (
    await_retry,
    failed,
    interrupted,
    paused,
    preempted,
    raised,
    step_error,
    unmark,
)
from continuum._steps.budget import observe
from continuum._steps.signals import Abort, Paused, Preempted, Suspend
from continuum._steps.turn_state import TurnState
from continuum.errors import UnserializableValueError


class StepCaller:
    """The step calls of one turn or child context, on its state."""

    __slots__ = ("state",)

    def __init__(self, state: TurnState) -> None:
        self.state = state

    def call(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any:
        """Call ``step``: its recorded outcome on replay, else run it live."""
        state = self.state
        if state.unwinding is not None:
            raise state.unwinding  # user code caught it: it still unwinds, and is noticed
        if state.active_key is not None:
            return step.run_nested(args, kwargs)
        with state.lock:  # the record is shared with the branches of a batch, if any
            journal = state.journal
            replaying = journal.position < len(journal.entries)
            if replaying:
                state.replay_cancel()
            name = step.options.name
            key = journal.key_for(name, key, state.path)
            entry = journal.replay(name, key) if replaying else None
            if entry is not None and not entry.partial:
                state.record.counters.steps_replayed += 1
                if not entry.ok:
                    raise step_error(state, entry.error, key)
                return from_json(step.adapter, entry.result)
            if state.halt is not None:  # a branch of a batch
                state.halt_check()
            wall = now_s()
            due = wall - state.inbox.listed_at >= state.inbox_poll_s
            if due or state.record.cancel is not None:
                wall = state.boundary(reopen=entry is not None)
            if state.step_wrapper is not None:
                step = state.step_wrapper(step, state)
            return self._run_live(step, key, entry, wall, args, kwargs)

    # -- a live call: resume, attempts, record ---------------------------------------------------

    def _run_live(
        self,
        step: Step[Any, Any],
        key: str,
        resume: JournalEntry | None,
        wall: float,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run the step's attempts until one returns, and record its value. ``resume``: the
        journal's unfinished entry of it; ``wall``: now, as the boundary before it read it."""
        state, options, lock = self.state, step.options, self.state.lock
        stats = self.stats(options.name)
        # A step that is not done (paused, or between attempts) keeps its journal entry until
        # its next attempt starts, so a suspension before then loses neither.
        attempt, cursor, pending = 0, None, None
        if resume is not None:
            attempt, cursor, pending = self.resume(step, key, stats, resume)
            wall = now_s()  # after any backoff slept
        first = wall if resume is None or resume.since is None else resume.since
        while True:
            attempt += 1
            self.check_budget(options.name, stats, preemptible=options.preemptible)
            if pending is not None or state.record.recovering or options.at_most_once:
                pending, wall = self.begin(step, key, attempt, pending, wall)
            if state.observers is not None:
                state.step_started(
                    key, options.name, attempt, wall, replay=resume is not None, first=first
                )
            record = state.record
            state.active_key = f"{record.task_id}/{record.turn}/{state.path}{key}"
            state.active_cursor = cursor
            started = state.clock()
            lock.release()  # state.unlocked(), spelled out: on every step's path, it showed
            try:
                try:
                    if options.preemptible:
                        limit = state.budget.preempt_after(record.save_stats)
                        value = state.preemptor(lambda: step.fn(*args, **kwargs), limit)
                    else:
                        value = step.fn(*args, **kwargs)
                finally:
                    lock.acquire()
            except Preempted:
                took = round(state.clock() - started, 6)
                state.log_step(key, wall, took, attempt, "preempted", name=step.name)
                raise preempted(state, key, stats, started) from None
            except Paused as pause:
                unmark(state, pending)
                raise paused(
                    state, step, key, stats, started, attempt, wall, pause.cursor, since=first
                ) from None
            except Exception as exc:
                unmark(state, pending)
                pending = raised(state, step, key, stats, started, attempt, wall, exc, since=first)
                wall = now_s()  # the backoff is over: the next attempt starts now
                continue
            finally:
                state.active_key = None
                state.active_cursor = None
                if record.running_step is not None:
                    record.running_step = None
            return self.record_value(
                step, key, value, stats, started, attempt, wall, pending, first
            )

    def resume(
        self, step: Step[Any, Any], key: str, stats: StepStats, resume: JournalEntry
    ) -> tuple[int, Any, JournalEntry | None]:
        """Where an unfinished step goes on: (attempts made, cursor, the entry to reopen)."""
        if resume.started:
            # An at_most_once step whose worker died after it started: never run it again.
            return resume.attempts, None, interrupted(self.state, step, key, stats, resume)
        if resume.retry_at is not None:
            await_retry(self.state, key, stats, resume)
            return resume.attempts, None, resume
        return resume.attempts - 1, resume.cursor, resume

    def begin(
        self,
        step: Step[Any, Any],
        key: str,
        attempt: int,
        pending: JournalEntry | None,
        wall: float,
    ) -> tuple[JournalEntry | None, float]:
        """Before attempt ``attempt`` of a step resumed, in recovery or at most once: reopen its
        unfinished entry, and save what must be saved first. Returns the entry to take back
        when the attempt ends, and now."""
        state, options = self.state, step.options
        if pending is not None:
            state.journal.reopen()
            pending = None
        if state.record.recovering:
            self._mark_start(key)
            wall = now_s()
        if options.at_most_once:
            # Saved before the step runs: if its worker dies inside it, it is not rerun.
            pending = JournalEntry(key, options.name, attempts=attempt, partial=True, started=True)
            state.append(pending)
            state.save_strict()
            wall = now_s()
        return pending, wall

    def record_value(
        self,
        step: Step[Any, Any],
        key: str,
        value: Any,
        stats: StepStats,
        started: float,
        attempt: int,
        wall: float,
        pending: JournalEntry | None,
        first: float | None = None,
    ) -> Any:
        """Journal the value an attempt returned, as JSON; save by policy; return the value
        as a replay would rebuild it. ``first``: when its first attempt started."""
        state = self.state
        record, name = state.record, step.options.name
        elapsed = state.clock() - started
        observe(stats, elapsed)
        elapsed = round(elapsed, 6)
        if pending is not None:
            unmark(state, pending)
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
                message = exc.message
                if inspect.iscoroutine(value):  # an async def called where nothing awaits it
                    value.close()
                    message = (
                        f"step {key!r} returned a coroutine: it is async def, so call it with "
                        "await in an async task (ctx.step_async, or the step itself)"
                    )
                error = ErrorInfo(
                    type=type(exc).__name__, message=message, step=key, turn=record.turn
                )
                raise failed(state, step, key, attempt, elapsed, error) from exc
        entry = JournalEntry(
            key, name, ok=True, result=result, duration_s=elapsed, attempts=attempt
        )
        if state.observers is not None:  # when it began: what an observer of the record reads
            entry.since = first or wall
        state.journal.append(entry)
        state.progress = True
        if state.invocation is not None or state.observers is not None:
            state.log_step(key, wall, elapsed, attempt, "ok", name=name, result=result)
        record.counters.steps_executed += 1
        if step.options.effect or state.clock() - state.last_save >= state.persist_every_s:
            state.save()
            state.last_save = state.clock()
        return from_json(adapter, result) if rebuild else value

    # -- work that is not a step (creating child tasks), under the same budget -------------------

    def check_work(self, name: str) -> None:
        """Suspend before a unit of framework work that will not fit, as before a step."""
        self.check_budget(name, self.stats(name), preemptible=False)

    def observe_work(self, name: str, seconds: float) -> None:
        """Note how long a unit of framework work took, as for a step."""
        observe(self.stats(name), seconds)

    # -- pieces ----------------------------------------------------------------------------------

    def stats(self, name: str) -> StepStats:
        """The step's (or the unit of work's) statistics in the record, made at its first use."""
        all_stats = self.state.record.step_stats
        stats = all_stats.get(name)
        if stats is None:
            stats = all_stats[name] = StepStats()
        return stats

    def check_budget(self, name: str, stats: StepStats, *, preemptible: bool) -> None:
        state = self.state
        save_stats = state.record.save_stats
        reason = state.budget.refuse(name, stats, save_stats, preemptible=preemptible)
        if reason is None:
            return
        if state.progress:
            raise state.unwind(Suspend(reason))
        # Nothing done yet in this invocation. Suspend only if a fresh invocation would have
        # the time and the last one did not already suspend idle; otherwise suspending could
        # only loop, so run the step and let the deadline judge.
        fresh = state.record.invocation_budget_s
        need = state.budget.need(stats, save_stats, preemptible=preemptible)
        if state.record.idle_suspensions == 0 and need <= fresh:
            raise state.unwind(Suspend(f"{reason}; a fresh invocation has {fresh:.2f}s"))

    def _mark_start(self, key: str) -> None:
        """In recovery: save which step starts now, or fail if it keeps killing its worker."""
        state = self.state
        error = mark_step(state.record, state.journal.position, key, state.max_step_crashes)
        if error is not None:
            raise state.unwind(Abort(error))
        state.save()
